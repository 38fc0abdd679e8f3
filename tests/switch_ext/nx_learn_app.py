"""A Ryu app for ``test_nx_network.py``: a MAC-learning switch made only of Nicira
extensions, the classic Open vSwitch ``learn`` example, so no packet ever reaches the
controller.

Table 0, for every frame: ``learn`` into table 1 an entry "eth_dst = this eth_src ->
load this in_port into reg0[0..15]", then ``resubmit`` into table 1 and ``output_reg``
reg0[0..15]. Table 1's default entry loads 0xfffb (OFPP_FLOOD as a 16-bit port) into
reg0, so unknown destinations are flooded. Every 0.5 s the app asks for table 1's flow
stats and logs each learned entry as ``LEARNED <eth_dst> <port> <packets>``.
"""

from __future__ import annotations

from typing import Any

from ryu.base import app_manager
from ryu.controller import ofp_event
from ryu.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from ryu.lib import hub
from ryu.ofproto import nicira_ext, ofproto_v1_3


class NxLearnSwitch(app_manager.RyuApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.datapaths: list[Any] = []
        self.poller = hub.spawn(self._poll)

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def features(self, ev: Any) -> None:
        dp = ev.msg.datapath
        p = dp.ofproto_parser
        learn = p.NXActionLearn(
            table_id=1,
            priority=10,
            idle_timeout=60,
            cookie=0x1EA2,
            specs=[
                p.NXFlowSpecMatch(src=("eth_src_nxm", 0), dst=("eth_dst_nxm", 0), n_bits=48),
                p.NXFlowSpecLoad(src=("in_port_nxm", 0), dst=("reg0", 0), n_bits=16),
            ],
        )
        table0 = [
            learn,
            p.NXActionResubmitTable(table_id=1),
            p.NXActionOutputReg(ofs_nbits=nicira_ext.ofs_nbits(0, 15), src="reg0", max_len=0),
        ]
        flood = [p.NXActionRegLoad(ofs_nbits=nicira_ext.ofs_nbits(0, 15), dst="reg0", value=0xFFFB)]
        for table, actions in ((0, table0), (1, flood)):
            inst = [p.OFPInstructionActions(dp.ofproto.OFPIT_APPLY_ACTIONS, actions)]
            dp.send_msg(p.OFPFlowMod(dp, table_id=table, priority=0, instructions=inst))
        self.datapaths.append(dp)

    def _poll(self) -> None:
        while True:
            for dp in self.datapaths:
                dp.send_msg(dp.ofproto_parser.OFPFlowStatsRequest(dp, table_id=1))
            hub.sleep(0.5)

    @set_ev_cls(ofp_event.EventOFPFlowStatsReply, MAIN_DISPATCHER)
    def stats(self, ev: Any) -> None:
        for f in ev.msg.body:
            if f.priority != 10 or f.cookie != 0x1EA2:
                continue
            # The learned entry: match eth_dst, one action, the reg_load of the port.
            port = f.instructions[0].actions[0].value
            self.logger.info("LEARNED %s %d %d", f.match["eth_dst"], port, f.packet_count)

    @set_ev_cls(ofp_event.EventOFPErrorMsg, MAIN_DISPATCHER)
    def error(self, ev: Any) -> None:
        self.logger.info("OFPT_ERROR type=%d code=%d", ev.msg.type, ev.msg.code)
