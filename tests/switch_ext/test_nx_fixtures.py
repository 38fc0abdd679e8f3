"""The committed Nicira-extension fixtures are what Ryu's encoder writes today.

``gen_nx_fixtures.py`` encodes flow mods with every Nicira action and learn flow-spec kind
switch_ext implements; ``switch_ext/tests/nx_vectors.rs`` checks the switch decodes and
re-encodes them byte-for-byte. This test regenerates them and fails if the committed file
differs (a Ryu upgrade, or an edit of the generator without regenerating), and checks
that Ryu's own parser reads every Ryu-made fixture back to the same bytes.
"""

from __future__ import annotations

import json

import gen_nx_fixtures as gen
from ryu.ofproto import ofproto_parser
from ryu.ofproto import ofproto_v1_3 as ofp


def test_committed_fixtures_match_the_generator() -> None:
    with open(gen.OUT) as fh:
        committed = fh.read()
    fresh = gen.render(gen.build())
    assert fresh == committed, (
        "switch_ext/tests/fixtures/nx_of13.json is stale: run "
        ".venv/bin/python tests/switch_ext/gen_nx_fixtures.py and commit the result"
    )


def test_every_subtype_and_spec_kind_is_covered() -> None:
    doc = json.loads(gen.render(gen.build()))
    names = {f["name"] for f in doc["fixtures"]}
    for kind in ("match_field", "match_immediate", "load_field", "load_immediate",
                 "output_field"):
        assert f"learn_{kind}" in names
    for action in ("resubmit", "resubmit_table", "output_reg", "note", "exit", "fin_timeout"):
        assert action in names
    assert {f"match_reg{r}" for r in range(8)} <= names
    refused = [f for f in doc["fixtures"] if f["error"] is not None]
    assert len(refused) >= 10 and all(len(f["error"]) == 2 for f in refused)


def test_ryu_reads_its_fixtures_back() -> None:
    n = 0
    for f in gen.build()["fixtures"]:
        buf = bytes.fromhex(f["hex"])
        version, msg_type, msg_len, xid = ofproto_parser.header(buf)
        assert msg_len == len(buf), f["name"]
        # Ryu parses flow mods but not packet outs (it never receives one).
        if not f["ryu"] or msg_type != ofp.OFPT_FLOW_MOD:
            continue
        n += 1
        msg = ofproto_parser.msg(gen.DP, version, msg_type, msg_len, xid, buf)
        msg.serialize()
        assert bytes(msg.buf) == buf, f["name"]
    assert n >= 50
