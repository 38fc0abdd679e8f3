// SPDX-License-Identifier: GPL-2.0
/* DCTCP (Alizadeh et al., SIGCOMM 2010; RFC 8257) as a BPF struct_ops TCP congestion
 * control, for kernels without the dctcp module. It follows the kernel's tcp_dctcp.c:
 * alpha (in 1/1024) is updated once per window of data from the fraction of delivered
 * bytes that were CE-marked, with gain g = 1/16; on congestion the window shrinks by
 * alpha/2; the receiver side keeps DCTCP's exact CE echo (an immediate ACK whenever the
 * CE state of arriving data changes). Growth is Reno's. A connection that did not
 * negotiate ECN falls back to reno (like the kernel module).
 *
 * Registered under the name "dcnlab_dctcp" (tcp_congestion_ops names are global):
 * dcnlab maps `congestion: dctcp` to it when the kernel has no dctcp of its own.
 * Build: build_bpf.sh (needs clang and bpftool; vmlinux.h is generated from the running
 * kernel's BTF). Load/unload: hosts/dctcp/loader.py.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char _license[] SEC("license") = "GPL";

#define DCTCP_MAX_ALPHA 1024U
#define DCTCP_SHIFT_G 4U /* g = 1/2^4 */
#define TCP_CONG_NEEDS_ECN 0x2
#define TCP_ECN_OK 1
#define TCP_ECN_DEMAND_CWR 4
#define SOL_TCP 6
#define TCP_CONGESTION 13

extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;

struct dctcp {
	__u32 old_delivered;
	__u32 old_delivered_ce;
	__u32 prior_rcv_nxt;
	__u32 dctcp_alpha;
	__u32 next_seq;
	__u32 ce_state;
	__u32 loss_cwnd;
};

static const char fallback[] = "reno";

static __always_inline struct tcp_sock *tcp_sk(const struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

static __always_inline struct inet_connection_sock *inet_csk(const struct sock *sk)
{
	return (struct inet_connection_sock *)sk;
}

static __always_inline struct dctcp *ca_of(const struct sock *sk)
{
	return (struct dctcp *)inet_csk(sk)->icsk_ca_priv;
}

static __always_inline bool before(__u32 seq1, __u32 seq2)
{
	return (__s32)(seq1 - seq2) < 0;
}

static __always_inline void dctcp_reset(const struct tcp_sock *tp, struct dctcp *ca)
{
	ca->next_seq = tp->snd_nxt;
	ca->old_delivered = tp->delivered;
	ca->old_delivered_ce = tp->delivered_ce;
}

SEC("struct_ops")
void BPF_PROG(dctcp_init, struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct dctcp *ca = ca_of(sk);

	if (!(tp->ecn_flags & TCP_ECN_OK) && sk->__sk_common.skc_state != TCP_LISTEN &&
	    sk->__sk_common.skc_state != TCP_CLOSE) {
		/* No ECN on this connection: DCTCP's window rule would not react to loss
		 * the way the network expects; behave as reno, as the kernel module does. */
		bpf_setsockopt(sk, SOL_TCP, TCP_CONGESTION, (void *)fallback, sizeof(fallback));
		return;
	}
	ca->prior_rcv_nxt = tp->rcv_nxt;
	ca->dctcp_alpha = DCTCP_MAX_ALPHA;
	ca->loss_cwnd = 0;
	ca->ce_state = 0;
	dctcp_reset(tp, ca);
}

SEC("struct_ops")
__u32 BPF_PROG(dctcp_ssthresh, struct sock *sk)
{
	struct dctcp *ca = ca_of(sk);
	struct tcp_sock *tp = tcp_sk(sk);
	__u32 cwnd = tp->snd_cwnd;
	__u32 w = cwnd - ((cwnd * ca->dctcp_alpha) >> 11U);

	ca->loss_cwnd = cwnd;
	return w > 2U ? w : 2U;
}

SEC("struct_ops")
void BPF_PROG(dctcp_update_alpha, struct sock *sk, __u32 flags)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	struct dctcp *ca = ca_of(sk);

	/* Once per window of data. */
	if (!before(tp->snd_una, ca->next_seq)) {
		__u32 delivered = tp->delivered - ca->old_delivered;
		__u32 delivered_ce = tp->delivered_ce - ca->old_delivered_ce;
		__u32 alpha = ca->dctcp_alpha;
		__u32 dec = alpha >> DCTCP_SHIFT_G;

		/* alpha = (1 - g) alpha, and it reaches 0 rather than sticking at 1..15 */
		alpha -= dec ? dec : alpha;
		if (delivered_ce) {
			/* + g * F, F = marked / delivered (in 1/1024) */
			delivered_ce <<= (10U - DCTCP_SHIFT_G);
			delivered_ce /= delivered > 1U ? delivered : 1U;
			alpha += delivered_ce;
			if (alpha > DCTCP_MAX_ALPHA)
				alpha = DCTCP_MAX_ALPHA;
		}
		ca->dctcp_alpha = alpha;
		dctcp_reset(tp, ca);
	}
}

static __always_inline void dctcp_react_to_loss(struct sock *sk)
{
	struct dctcp *ca = ca_of(sk);
	struct tcp_sock *tp = tcp_sk(sk);
	__u32 half = tp->snd_cwnd >> 1U;

	ca->loss_cwnd = tp->snd_cwnd;
	tp->snd_ssthresh = half > 2U ? half : 2U;
}

SEC("struct_ops")
void BPF_PROG(dctcp_state, struct sock *sk, __u8 new_state)
{
	if (new_state == TCP_CA_Recovery && new_state != inet_csk(sk)->icsk_ca_state)
		dctcp_react_to_loss(sk);
	/* Other states: nothing (as the kernel module). */
}

static __always_inline void dctcp_ece_ack_cwr(struct sock *sk, __u32 ce_state)
{
	struct tcp_sock *tp = tcp_sk(sk);

	if (ce_state == 1)
		tp->ecn_flags |= TCP_ECN_DEMAND_CWR;
	else
		tp->ecn_flags &= ~TCP_ECN_DEMAND_CWR;
}

SEC("struct_ops")
void BPF_PROG(dctcp_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	struct dctcp *ca = ca_of(sk);

	if (ev == CA_EVENT_ECN_IS_CE || ev == CA_EVENT_ECN_NO_CE) {
		__u32 new_ce_state = ev == CA_EVENT_ECN_IS_CE ? 1 : 0;

		if (ca->ce_state != new_ce_state) {
			/* CE state changed: ACK at once so the sender sees exactly which
			 * bytes were marked; a delayed ACK goes first with the old state. */
			if (inet_csk(sk)->icsk_ack.pending & ICSK_ACK_TIMER) {
				dctcp_ece_ack_cwr(sk, ca->ce_state);
				bpf_tcp_send_ack(sk, ca->prior_rcv_nxt);
			}
			inet_csk(sk)->icsk_ack.pending |= ICSK_ACK_NOW;
		}
		ca->prior_rcv_nxt = tcp_sk(sk)->rcv_nxt;
		ca->ce_state = new_ce_state;
		dctcp_ece_ack_cwr(sk, new_ce_state);
	} else if (ev == CA_EVENT_LOSS) {
		dctcp_react_to_loss(sk);
	}
}

SEC("struct_ops")
__u32 BPF_PROG(dctcp_cwnd_undo, struct sock *sk)
{
	const struct dctcp *ca = ca_of(sk);
	__u32 cwnd = tcp_sk(sk)->snd_cwnd;

	return cwnd > ca->loss_cwnd ? cwnd : ca->loss_cwnd;
}

SEC("struct_ops")
void BPF_PROG(dctcp_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	tcp_reno_cong_avoid(sk, ack, acked);
}

SEC(".struct_ops")
struct tcp_congestion_ops dcnlab_dctcp = {
	.init = (void *)dctcp_init,
	.in_ack_event = (void *)dctcp_update_alpha,
	.cwnd_event = (void *)dctcp_cwnd_event,
	.ssthresh = (void *)dctcp_ssthresh,
	.cong_avoid = (void *)dctcp_cong_avoid,
	.undo_cwnd = (void *)dctcp_cwnd_undo,
	.set_state = (void *)dctcp_state,
	.flags = TCP_CONG_NEEDS_ECN,
	.name = "dcnlab_dctcp",
};
