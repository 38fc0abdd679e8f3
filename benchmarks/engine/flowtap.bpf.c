// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
/*
 * dcnlab flow tap: which fabric links each flow crossed, and when.
 *
 * A tc classifier (clsact ingress, direct action) on the switch-side veth of every
 * fabric (switch-to-switch) port of a run.  Packets that arrive on that veth are the
 * ones the peer switch sent over the link, so (flow, ifindex) names a directed link.
 * Per (IPv4 5-tuple, ifindex) it counts bytes and packets (IPv4 frames, and IPv4 under
 * the one MPLS label of switch_ext's CONGA overlay, whose 4 bytes count) and keeps the
 * first and last CLOCK_MONOTONIC ns; SYN packets (TCP-Path explores by flooding SYN copies over
 * links the flow never uses) are counted apart and do not set first/last.
 *
 * It always returns TC_ACT_OK: forwarding is never changed.  Built with clang from
 * linux-libc-dev's <linux/bpf.h> and libbpf's helper headers (build_flowtap.sh).
 */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define ETH_HLEN 14
#define ETH_P_IP 0x0800
#define ETH_P_MPLS_UC 0x8847
#define IPPROTO_TCP 6
#define IPPROTO_UDP 17
#define TCP_FLAG_SYN 0x02

/* Python side: struct.pack("=4s4sHHBxxxI"): addresses raw network order, ports host
 * order. */
struct tap_key {
	__u32 saddr;
	__u32 daddr;
	__u16 sport;
	__u16 dport;
	__u8 proto;
	__u8 pad[3];
	__u32 ifindex;
};

/* Python side: struct.pack("=QQQQQQ"). */
struct tap_val {
	__u64 bytes;     /* non-SYN packets' skb->len */
	__u64 pkts;      /* non-SYN packets */
	__u64 first_ns;  /* first non-SYN packet (0: none yet) */
	__u64 last_ns;   /* last non-SYN packet */
	__u64 syn_pkts;  /* packets with SYN set */
	__u64 syn_ns;    /* first packet of any kind (SYN included) */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 262144);
	__type(key, struct tap_key);
	__type(value, struct tap_val);
} taps SEC(".maps");

/* [0] packets seen, [1] IPv4 TCP/UDP packets counted, [2] entries lost (map full). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 3);
	__type(key, __u32);
	__type(value, __u64);
} tapstats SEC(".maps");

static __always_inline void bump(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&tapstats, &idx);

	if (v)
		*v += 1;
}

SEC("tc")
int dcnlab_flowtap(struct __sk_buff *skb)
{
	struct tap_key key = {};
	struct tap_val fresh = {};
	struct tap_val *val;
	__u8 ihl_byte, proto, flags = 0;
	__u16 ports[2];
	__u64 now;
	int syn;

	__u32 l3 = ETH_HLEN;
	__u8 mpls_bos;

	bump(0);
	if (skb->protocol == bpf_htons(ETH_P_MPLS_UC)) {
		/* one label over IPv4 (switch_ext's CONGA overlay): the packet follows it */
		if (bpf_skb_load_bytes(skb, ETH_HLEN + 2, &mpls_bos, 1) < 0 || !(mpls_bos & 1))
			return TC_ACT_OK;
		l3 += 4;
	} else if (skb->protocol != bpf_htons(ETH_P_IP)) {
		return TC_ACT_OK;
	}
	if (bpf_skb_load_bytes(skb, l3, &ihl_byte, 1) < 0 || ihl_byte >> 4 != 4)
		return TC_ACT_OK;
	if (bpf_skb_load_bytes(skb, l3 + 9, &proto, 1) < 0)
		return TC_ACT_OK;
	if (proto != IPPROTO_TCP && proto != IPPROTO_UDP)
		return TC_ACT_OK;
	if (bpf_skb_load_bytes(skb, l3 + 12, &key.saddr, 8) < 0)
		return TC_ACT_OK;
	__u32 l4 = l3 + (__u32)(ihl_byte & 0x0f) * 4;

	if (bpf_skb_load_bytes(skb, l4, ports, 4) < 0)
		return TC_ACT_OK;
	if (proto == IPPROTO_TCP && bpf_skb_load_bytes(skb, l4 + 13, &flags, 1) < 0)
		return TC_ACT_OK;
	key.sport = bpf_ntohs(ports[0]);
	key.dport = bpf_ntohs(ports[1]);
	key.proto = proto;
	key.ifindex = skb->ifindex;
	syn = proto == IPPROTO_TCP && (flags & TCP_FLAG_SYN);
	now = bpf_ktime_get_ns();
	bump(1);

	val = bpf_map_lookup_elem(&taps, &key);
	if (!val) {
		fresh.syn_ns = now;
		if (bpf_map_update_elem(&taps, &key, &fresh, BPF_NOEXIST) < 0) {
			val = bpf_map_lookup_elem(&taps, &key); /* another CPU inserted it */
			if (!val) {
				bump(2);
				return TC_ACT_OK;
			}
		} else {
			val = bpf_map_lookup_elem(&taps, &key);
			if (!val)
				return TC_ACT_OK;
		}
	}
	if (syn) {
		__sync_fetch_and_add(&val->syn_pkts, 1);
		return TC_ACT_OK;
	}
	__sync_fetch_and_add(&val->bytes, skb->len);
	__sync_fetch_and_add(&val->pkts, 1);
	if (val->first_ns == 0)
		val->first_ns = now;
	val->last_ns = now;
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
