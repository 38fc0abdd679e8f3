"""Rule data -> Ryu OpenFlow 1.3 messages, and the minimal message set for a change.

Everything a switch receives from dcnlab goes through here, so the in-memory table
model (:mod:`dcnlab.controller.oftable`) can replay exactly the messages a real
switch would get.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ryu.ofproto import nicira_ext
from ryu.ofproto import ofproto_v1_3 as ofp
from ryu.ofproto import ofproto_v1_3_parser as parser

from dcnlab.controller.rules import (
    COOKIE_SPACE,
    COOKIE_SPACE_MASK,
    Action,
    FlowEntry,
    GroupEntry,
    SwitchRules,
)

_GROUP_TYPES = {
    "all": ofp.OFPGT_ALL,
    "select": ofp.OFPGT_SELECT,
    "indirect": ofp.OFPGT_INDIRECT,
    "ff": ofp.OFPGT_FF,
}


NX_IN_PORT = 0xFFF8  # NXAST_RESUBMIT_TABLE: keep the packet's in_port


def _learn_spec(spec: tuple[Any, ...]) -> Any:
    """One ``learn`` flow spec: ``("match", dst, dst_ofs, src, n_bits)``,
    ``("load", dst, dst_ofs, src, n_bits)`` or ``("output", src, n_bits)``; ``src`` is an
    immediate integer or a ``(field, ofs)`` pair."""
    kind = spec[0]
    if kind == "match":
        _, dst, dst_ofs, src, n_bits = spec
        return parser.NXFlowSpecMatch(src=src, dst=(dst, dst_ofs), n_bits=n_bits)
    if kind == "load":
        _, dst, dst_ofs, src, n_bits = spec
        return parser.NXFlowSpecLoad(src=src, dst=(dst, dst_ofs), n_bits=n_bits)
    if kind == "output":
        _, src, n_bits = spec
        return parser.NXFlowSpecOutput(src=src, n_bits=n_bits)
    raise ValueError(f"unknown learn spec {spec!r}")


def to_action(action: Action) -> Any:
    """A Ryu action from its tuple form.

    OpenFlow 1.3: ``("output", port[, max_len])``, ``("group", gid)``, ``("set_field",
    field, value)``, ``("push_vlan", ethertype)``, ``("pop_vlan",)``, ``("dec_nw_ttl",)``.
    Nicira extensions (Open vSwitch; switch_ext implements the same subset):
    ``("resubmit", table)``, ``("load", field, start, n_bits, value)``, ``("move", src,
    src_start, dst, dst_start, n_bits)``, ``("output_reg", field, start, n_bits)`` and
    ``("learn", table, priority, idle_timeout, hard_timeout, cookie, flags, specs)`` with
    specs as :func:`_learn_spec` takes them.
    """
    kind = action[0]
    if kind == "output":
        port = action[1]
        max_len = action[2] if len(action) > 2 else ofp.OFPCML_MAX
        return parser.OFPActionOutput(port, max_len)
    if kind == "group":
        return parser.OFPActionGroup(action[1])
    if kind == "set_field":
        return parser.OFPActionSetField(**{action[1]: action[2]})
    if kind == "push_vlan":
        return parser.OFPActionPushVlan(action[1])
    if kind == "pop_vlan":
        return parser.OFPActionPopVlan()
    if kind == "dec_nw_ttl":
        return parser.OFPActionDecNwTtl()
    if kind == "resubmit":
        return parser.NXActionResubmitTable(in_port=NX_IN_PORT, table_id=action[1])
    if kind == "load":
        _, dst, start, n_bits, value = action
        return parser.NXActionRegLoad(ofs_nbits=nicira_ext.ofs_nbits(start, start + n_bits - 1),
                                      dst=dst, value=value)
    if kind == "move":
        _, src, src_ofs, dst, dst_ofs, n_bits = action
        return parser.NXActionRegMove(src_field=src, dst_field=dst, n_bits=n_bits,
                                      src_ofs=src_ofs, dst_ofs=dst_ofs)
    if kind == "output_reg":
        _, src, start, n_bits = action
        return parser.NXActionOutputReg(ofs_nbits=nicira_ext.ofs_nbits(start, start + n_bits - 1),
                                        src=src, max_len=0)
    if kind == "learn":
        _, table, priority, idle, hard, cookie, flags, specs = action
        return parser.NXActionLearn(table_id=table, specs=[_learn_spec(s) for s in specs],
                                    idle_timeout=idle, hard_timeout=hard, priority=priority,
                                    cookie=cookie, flags=flags)
    raise ValueError(f"unknown action {action!r}")


def _instructions(actions: Iterable[Action]) -> list[Any]:
    acts = [to_action(a) for a in actions]
    if not acts:
        return []  # no instructions: the packet is dropped
    return [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, acts)]


def flow_add(dp: Any, entry: FlowEntry) -> Any:
    return parser.OFPFlowMod(
        dp,
        cookie=entry.cookie,
        table_id=entry.table_id,
        command=ofp.OFPFC_ADD,
        idle_timeout=entry.idle_timeout,
        hard_timeout=entry.hard_timeout,
        priority=entry.priority,
        match=parser.OFPMatch(**dict(entry.match)),
        instructions=_instructions(entry.actions),
    )


def flow_delete_strict(dp: Any, entry: FlowEntry) -> Any:
    return parser.OFPFlowMod(
        dp,
        table_id=entry.table_id,
        command=ofp.OFPFC_DELETE_STRICT,
        priority=entry.priority,
        out_port=ofp.OFPP_ANY,
        out_group=ofp.OFPG_ANY,
        match=parser.OFPMatch(**dict(entry.match)),
    )


def _buckets(group: GroupEntry) -> list[Any]:
    return [
        parser.OFPBucket(
            weight=b.weight if group.type == "select" else 0,
            watch_port=b.watch_port if b.watch_port is not None else ofp.OFPP_ANY,
            watch_group=ofp.OFPG_ANY,
            actions=[to_action(a) for a in b.actions],
        )
        for b in group.buckets
    ]


def group_mod(dp: Any, group: GroupEntry, command: int = ofp.OFPGC_ADD) -> Any:
    return parser.OFPGroupMod(dp, command, _GROUP_TYPES[group.type], group.group_id,
                              _buckets(group))


def group_delete(dp: Any, group_id: int) -> Any:
    return parser.OFPGroupMod(dp, ofp.OFPGC_DELETE, ofp.OFPGT_ALL, group_id, [])


def delete_ours(dp: Any) -> list[Any]:
    """Remove every entry any dcnlab app installed (by cookie space) and every group."""
    return [
        parser.OFPFlowMod(
            dp,
            cookie=COOKIE_SPACE,
            cookie_mask=COOKIE_SPACE_MASK,
            table_id=ofp.OFPTT_ALL,
            command=ofp.OFPFC_DELETE,
            out_port=ofp.OFPP_ANY,
            out_group=ofp.OFPG_ANY,
            match=parser.OFPMatch(),
        ),
        group_delete(dp, ofp.OFPG_ALL),
    ]


def changes(dp: Any, old: SwitchRules | None, new: SwitchRules) -> list[Any]:
    """Messages turning a switch holding ``old`` into one holding ``new``.

    Order keeps forwarding sane during the change: groups exist before the flows
    that point to them, and disappear only after those flows are gone.
    """
    old_flows = old.flows if old else set()
    old_groups = old.groups if old else {}
    msgs: list[Any] = []
    for gid, group in sorted(new.groups.items()):
        if gid not in old_groups:
            msgs.append(group_mod(dp, group, ofp.OFPGC_ADD))
        elif old_groups[gid] != group:
            msgs.append(group_mod(dp, group, ofp.OFPGC_MODIFY))
    new_keys = {e.key for e in new.flows}
    msgs += [flow_add(dp, e) for e in sorted(new.flows - old_flows)]
    msgs += [flow_delete_strict(dp, e) for e in sorted(old_flows) if e.key not in new_keys]
    msgs += [group_delete(dp, gid) for gid in sorted(old_groups) if gid not in new.groups]
    return msgs
