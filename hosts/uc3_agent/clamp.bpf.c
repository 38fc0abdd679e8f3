// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
/*
 * dcnlab UC3 agent: cap the congestion window of selected TCP flows, and keep the
 * figures the agent reports for every flow of its cgroup.
 *
 * A sock_ops program attached to the agent's cgroup v2.  The agent writes
 * 4-tuple -> (window, lease expiry) into the pinned hash map "clamps"; the program
 * applies bpf_setsockopt(TCP_BPF_SNDCWND_CLAMP) to matching sockets when they are
 * established and then on every RTT sample (BPF_SOCK_OPS_RTT_CB_FLAG), so a live flow
 * follows map updates within one ACK.  When an entry disappears or its lease expires,
 * the clamp is lifted (set to INT_MAX): fail open even if the agent itself died.
 *
 * Built with clang from linux-libc-dev's <linux/bpf.h> and libbpf's helper headers,
 * no kernel headers or vmlinux.h needed (see build_bpf.sh).
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

/* From include/uapi/linux/bpf.h of newer kernels; Debian 12's copy lacks the enum. */
#define TCP_BPF_SNDCWND_CLAMP 1002
#define SOL_TCP 6
#define AF_INET 2
#define AF_INET6 10
#define CLAMP_NONE 0x7fffffff /* what "no clamp" is set to: val must be > 0 */

/* Python side: struct.pack("=I16s16sHH"); addresses raw network-order bytes,
 * IPv4 in the first 4 bytes; ports in host order; local = this host's end. */
struct flow_key {
	__u32 family;
	__u32 laddr[4];
	__u32 raddr[4];
	__u16 lport;
	__u16 rport;
};

/* Python side: struct.pack("=IIQ"). */
struct clamp_val {
	__u32 window;      /* segments, 1..65535 */
	__u32 flags;       /* reserved, 0 */
	__u64 expires_ns;  /* CLOCK_MONOTONIC; 0 = never */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct flow_key);
	__type(value, struct clamp_val);
} clamps SEC(".maps");

/* Per socket: the clamp last applied (0 = none), so unchanged flows cost one lookup. */
struct applied {
	__u32 window;
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct applied);
} applied SEC(".maps");

/* Per established socket of the cgroup: what the agent reports, refreshed on every RTT
 * sample and removed when the socket closes, so a report reads a small map instead of
 * dumping every TCP socket of the machine.  Python side: struct.pack("=IIIIQIIQ").
 * Sized as the protocol's bound on a report (MAX_FLOWS = 4096 flows): reading a hash
 * map visits every bucket, so each report pays for max_entries, not for the flows. */
struct flow_val {
	__u32 srtt_us;          /* smoothed RTT, us (the kernel keeps it << 3) */
	__u32 mss;
	__u32 cwnd;             /* segments */
	__u32 pad;
	__u64 bytes_acked;
	__u32 rate_delivered;   /* last rate sample: packets delivered ... */
	__u32 rate_interval_us; /* ... over this many us */
	__u64 updated_ns;       /* CLOCK_MONOTONIC */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct flow_key);
	__type(value, struct flow_val);
} flows SEC(".maps");

/* Counters for the agent's status output: [0] applied, [1] lifted, [2] errors. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

static __always_inline void count(__u32 idx)
{
	__u64 *c = bpf_map_lookup_elem(&stats, &idx);

	if (c)
		__sync_fetch_and_add(c, 1);
}

static __always_inline int fill_key(struct bpf_sock_ops *skops, struct flow_key *key)
{
	key->family = skops->family;
	if (skops->family == AF_INET) {
		key->laddr[0] = skops->local_ip4;
		key->raddr[0] = skops->remote_ip4;
	} else if (skops->family == AF_INET6) {
		key->laddr[0] = skops->local_ip6[0];
		key->laddr[1] = skops->local_ip6[1];
		key->laddr[2] = skops->local_ip6[2];
		key->laddr[3] = skops->local_ip6[3];
		key->raddr[0] = skops->remote_ip6[0];
		key->raddr[1] = skops->remote_ip6[1];
		key->raddr[2] = skops->remote_ip6[2];
		key->raddr[3] = skops->remote_ip6[3];
	} else {
		return -1;
	}
	key->lport = (__u16)skops->local_port;
	/* remote_port holds the network-order port in its upper 16 bits (little endian). */
	key->rport = (__u16)bpf_ntohl(skops->remote_port);
	return 0;
}

static __always_inline void apply(struct bpf_sock_ops *skops)
{
	struct flow_key key = {};
	struct clamp_val *val;
	struct applied *st;
	struct bpf_sock *sk;
	__u32 want = 0;
	int setval;

	if (fill_key(skops, &key))
		return;
	val = bpf_map_lookup_elem(&clamps, &key);
	if (val && val->window &&
	    (val->expires_ns == 0 || bpf_ktime_get_ns() < val->expires_ns))
		want = val->window;

	sk = skops->sk;
	if (!sk)
		return;
	st = bpf_sk_storage_get(&applied, sk, 0, want ? BPF_SK_STORAGE_GET_F_CREATE : 0);
	if (!st) {
		/* Never clamped and nothing wanted: the common case, nothing to do. */
		if (!want)
			return;
	} else if (st->window == want) {
		return;
	}
	setval = want ? (int)want : CLAMP_NONE;
	/* Also sets snd_ssthresh = val: on lifting, the flow slow-starts back up. */
	if (bpf_setsockopt(skops, SOL_TCP, TCP_BPF_SNDCWND_CLAMP, &setval, sizeof(setval))) {
		count(2);
		return;
	}
	if (st)
		st->window = want;
	count(want ? 0 : 1);
}

static __always_inline void record(struct bpf_sock_ops *skops)
{
	struct flow_key key = {};
	struct flow_val val = {};

	if (fill_key(skops, &key))
		return;
	val.srtt_us = skops->srtt_us >> 3;
	val.mss = skops->mss_cache;
	val.cwnd = skops->snd_cwnd;
	val.bytes_acked = skops->bytes_acked;
	val.rate_delivered = skops->rate_delivered;
	val.rate_interval_us = skops->rate_interval_us;
	val.updated_ns = bpf_ktime_get_ns();
	bpf_map_update_elem(&flows, &key, &val, BPF_ANY);
}

static __always_inline void forget(struct bpf_sock_ops *skops)
{
	struct flow_key key = {};

	if (!fill_key(skops, &key))
		bpf_map_delete_elem(&flows, &key);
}

#define TCP_CLOSE 7

SEC("sockops")
int dcnlab_clamp(struct bpf_sock_ops *skops)
{
	switch (skops->op) {
	case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB:
	case BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB:
		bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags |
					  BPF_SOCK_OPS_RTT_CB_FLAG |
					  BPF_SOCK_OPS_STATE_CB_FLAG);
		apply(skops);
		record(skops);
		break;
	case BPF_SOCK_OPS_RTT_CB:
		apply(skops);
		record(skops);
		break;
	case BPF_SOCK_OPS_STATE_CB:
		/* args[1] is the new state; a closed socket leaves the map. */
		if (skops->args[1] == TCP_CLOSE)
			forget(skops);
		break;
	default:
		break;
	}
	return 1;
}

char _license[] SEC("license") = "Dual BSD/GPL";
