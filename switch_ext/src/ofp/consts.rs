//! OpenFlow 1.3.5 wire constants (names follow the spec's `openflow.h`).
#![allow(missing_docs)]

pub const OFP_VERSION: u8 = 0x04;
pub const OFP_HEADER_LEN: usize = 8;
pub const OFP_MAX_MSG_LEN: usize = 0xffff;

// Message types.
pub const OFPT_HELLO: u8 = 0;
pub const OFPT_ERROR: u8 = 1;
pub const OFPT_ECHO_REQUEST: u8 = 2;
pub const OFPT_ECHO_REPLY: u8 = 3;
pub const OFPT_EXPERIMENTER: u8 = 4;
pub const OFPT_FEATURES_REQUEST: u8 = 5;
pub const OFPT_FEATURES_REPLY: u8 = 6;
pub const OFPT_GET_CONFIG_REQUEST: u8 = 7;
pub const OFPT_GET_CONFIG_REPLY: u8 = 8;
pub const OFPT_SET_CONFIG: u8 = 9;
pub const OFPT_PACKET_IN: u8 = 10;
pub const OFPT_FLOW_REMOVED: u8 = 11;
pub const OFPT_PORT_STATUS: u8 = 12;
pub const OFPT_PACKET_OUT: u8 = 13;
pub const OFPT_FLOW_MOD: u8 = 14;
pub const OFPT_GROUP_MOD: u8 = 15;
pub const OFPT_PORT_MOD: u8 = 16;
pub const OFPT_TABLE_MOD: u8 = 17;
pub const OFPT_MULTIPART_REQUEST: u8 = 18;
pub const OFPT_MULTIPART_REPLY: u8 = 19;
pub const OFPT_BARRIER_REQUEST: u8 = 20;
pub const OFPT_BARRIER_REPLY: u8 = 21;
pub const OFPT_QUEUE_GET_CONFIG_REQUEST: u8 = 22;
pub const OFPT_QUEUE_GET_CONFIG_REPLY: u8 = 23;
pub const OFPT_ROLE_REQUEST: u8 = 24;
pub const OFPT_ROLE_REPLY: u8 = 25;
pub const OFPT_GET_ASYNC_REQUEST: u8 = 26;
pub const OFPT_GET_ASYNC_REPLY: u8 = 27;
pub const OFPT_SET_ASYNC: u8 = 28;
pub const OFPT_METER_MOD: u8 = 29;

pub const OFPHET_VERSIONBITMAP: u16 = 1;

// Ports.
pub const OFPP_MAX: u32 = 0xffff_ff00;
pub const OFPP_IN_PORT: u32 = 0xffff_fff8;
pub const OFPP_TABLE: u32 = 0xffff_fff9;
pub const OFPP_NORMAL: u32 = 0xffff_fffa;
pub const OFPP_FLOOD: u32 = 0xffff_fffb;
pub const OFPP_ALL: u32 = 0xffff_fffc;
pub const OFPP_CONTROLLER: u32 = 0xffff_fffd;
pub const OFPP_LOCAL: u32 = 0xffff_fffe;
pub const OFPP_ANY: u32 = 0xffff_ffff;

pub const OFPCML_NO_BUFFER: u16 = 0xffff;
pub const OFP_NO_BUFFER: u32 = 0xffff_ffff;

pub const OFPTT_MAX: u8 = 0xfe;
pub const OFPTT_ALL: u8 = 0xff;

pub const OFPG_MAX: u32 = 0xffff_ff00;
pub const OFPG_ALL: u32 = 0xffff_fffc;
pub const OFPG_ANY: u32 = 0xffff_ffff;

// Port config / state bits.
pub const OFPPC_PORT_DOWN: u32 = 1 << 0;
pub const OFPPC_NO_RECV: u32 = 1 << 2;
pub const OFPPC_NO_FWD: u32 = 1 << 5;
pub const OFPPC_NO_PACKET_IN: u32 = 1 << 6;
pub const OFPPS_LINK_DOWN: u32 = 1 << 0;
pub const OFPPS_LIVE: u32 = 1 << 2;
pub const OFPPF_10GB_FD: u32 = 1 << 6;
pub const OFPPF_COPPER: u32 = 1 << 11;

pub const OFPPR_ADD: u8 = 0;
pub const OFPPR_DELETE: u8 = 1;
pub const OFPPR_MODIFY: u8 = 2;

// Capabilities.
pub const OFPC_FLOW_STATS: u32 = 1 << 0;
pub const OFPC_TABLE_STATS: u32 = 1 << 1;
pub const OFPC_PORT_STATS: u32 = 1 << 2;
pub const OFPC_GROUP_STATS: u32 = 1 << 3;

// Packet-in reasons.
pub const OFPR_NO_MATCH: u8 = 0;
pub const OFPR_ACTION: u8 = 1;
pub const OFPR_INVALID_TTL: u8 = 2;

// Flow mod.
pub const OFPFC_ADD: u8 = 0;
pub const OFPFC_MODIFY: u8 = 1;
pub const OFPFC_MODIFY_STRICT: u8 = 2;
pub const OFPFC_DELETE: u8 = 3;
pub const OFPFC_DELETE_STRICT: u8 = 4;
pub const OFPFF_SEND_FLOW_REM: u16 = 1 << 0;
pub const OFPFF_CHECK_OVERLAP: u16 = 1 << 1;
pub const OFPFF_RESET_COUNTS: u16 = 1 << 2;

pub const OFPRR_IDLE_TIMEOUT: u8 = 0;
pub const OFPRR_HARD_TIMEOUT: u8 = 1;
pub const OFPRR_DELETE: u8 = 2;
pub const OFPRR_GROUP_DELETE: u8 = 3;

// Group mod.
pub const OFPGC_ADD: u16 = 0;
pub const OFPGC_MODIFY: u16 = 1;
pub const OFPGC_DELETE: u16 = 2;
pub const OFPGT_ALL: u8 = 0;
pub const OFPGT_SELECT: u8 = 1;
pub const OFPGT_INDIRECT: u8 = 2;
pub const OFPGT_FF: u8 = 3;

// Match / OXM.
pub const OFPMT_OXM: u16 = 1;
pub const OFPXMC_OPENFLOW_BASIC: u16 = 0x8000;
pub const OFPXMC_EXPERIMENTER: u16 = 0xffff;
pub const ONF_EXPERIMENTER_ID: u32 = 0x4f4e_4600;
pub const OFPVID_PRESENT: u16 = 0x1000;

// Actions.
pub const OFPAT_OUTPUT: u16 = 0;
pub const OFPAT_COPY_TTL_OUT: u16 = 11;
pub const OFPAT_COPY_TTL_IN: u16 = 12;
pub const OFPAT_SET_MPLS_TTL: u16 = 15;
pub const OFPAT_DEC_MPLS_TTL: u16 = 16;
pub const OFPAT_PUSH_VLAN: u16 = 17;
pub const OFPAT_POP_VLAN: u16 = 18;
pub const OFPAT_PUSH_MPLS: u16 = 19;
pub const OFPAT_POP_MPLS: u16 = 20;
pub const OFPAT_SET_QUEUE: u16 = 21;
pub const OFPAT_GROUP: u16 = 22;
pub const OFPAT_SET_NW_TTL: u16 = 23;
pub const OFPAT_DEC_NW_TTL: u16 = 24;
pub const OFPAT_SET_FIELD: u16 = 25;
pub const OFPAT_PUSH_PBB: u16 = 26;
pub const OFPAT_POP_PBB: u16 = 27;
pub const OFPAT_EXPERIMENTER: u16 = 0xffff;

// Instructions.
pub const OFPIT_GOTO_TABLE: u16 = 1;
pub const OFPIT_WRITE_METADATA: u16 = 2;
pub const OFPIT_WRITE_ACTIONS: u16 = 3;
pub const OFPIT_APPLY_ACTIONS: u16 = 4;
pub const OFPIT_CLEAR_ACTIONS: u16 = 5;
pub const OFPIT_METER: u16 = 6;
pub const OFPIT_EXPERIMENTER: u16 = 0xffff;

// Multipart.
pub const OFPMP_DESC: u16 = 0;
pub const OFPMP_FLOW: u16 = 1;
pub const OFPMP_AGGREGATE: u16 = 2;
pub const OFPMP_TABLE: u16 = 3;
pub const OFPMP_PORT_STATS: u16 = 4;
pub const OFPMP_QUEUE: u16 = 5;
pub const OFPMP_GROUP: u16 = 6;
pub const OFPMP_GROUP_DESC: u16 = 7;
pub const OFPMP_GROUP_FEATURES: u16 = 8;
pub const OFPMP_METER: u16 = 9;
pub const OFPMP_METER_CONFIG: u16 = 10;
pub const OFPMP_METER_FEATURES: u16 = 11;
pub const OFPMP_TABLE_FEATURES: u16 = 12;
pub const OFPMP_PORT_DESC: u16 = 13;
pub const OFPMP_EXPERIMENTER: u16 = 0xffff;
pub const OFPMPF_REQ_MORE: u16 = 1;
pub const OFPMPF_REPLY_MORE: u16 = 1;

// Config flags.
pub const OFPC_FRAG_MASK: u16 = 3;

// Errors: types.
pub const OFPET_HELLO_FAILED: u16 = 0;
pub const OFPET_BAD_REQUEST: u16 = 1;
pub const OFPET_BAD_ACTION: u16 = 2;
pub const OFPET_BAD_INSTRUCTION: u16 = 3;
pub const OFPET_BAD_MATCH: u16 = 4;
pub const OFPET_FLOW_MOD_FAILED: u16 = 5;
pub const OFPET_GROUP_MOD_FAILED: u16 = 6;
pub const OFPET_PORT_MOD_FAILED: u16 = 7;
pub const OFPET_TABLE_MOD_FAILED: u16 = 8;
pub const OFPET_QUEUE_OP_FAILED: u16 = 9;
pub const OFPET_SWITCH_CONFIG_FAILED: u16 = 10;
pub const OFPET_ROLE_REQUEST_FAILED: u16 = 11;
pub const OFPET_METER_MOD_FAILED: u16 = 12;
pub const OFPET_TABLE_FEATURES_FAILED: u16 = 13;

// Error codes.
pub const OFPHFC_INCOMPATIBLE: u16 = 0;

pub const OFPBRC_BAD_VERSION: u16 = 0;
pub const OFPBRC_BAD_TYPE: u16 = 1;
pub const OFPBRC_BAD_MULTIPART: u16 = 2;
pub const OFPBRC_BAD_EXPERIMENTER: u16 = 3;
pub const OFPBRC_BAD_EXP_TYPE: u16 = 4;
pub const OFPBRC_EPERM: u16 = 5;
pub const OFPBRC_BAD_LEN: u16 = 6;
pub const OFPBRC_BUFFER_UNKNOWN: u16 = 8;
pub const OFPBRC_BAD_TABLE_ID: u16 = 9;
pub const OFPBRC_BAD_PORT: u16 = 11;
pub const OFPBRC_BAD_PACKET: u16 = 12;

pub const OFPBAC_BAD_TYPE: u16 = 0;
pub const OFPBAC_BAD_LEN: u16 = 1;
pub const OFPBAC_BAD_EXPERIMENTER: u16 = 2;
pub const OFPBAC_BAD_EXP_TYPE: u16 = 3;
pub const OFPBAC_BAD_OUT_PORT: u16 = 4;
pub const OFPBAC_BAD_ARGUMENT: u16 = 5;
pub const OFPBAC_BAD_OUT_GROUP: u16 = 9;
pub const OFPBAC_MATCH_INCONSISTENT: u16 = 10;
pub const OFPBAC_BAD_SET_TYPE: u16 = 13;
pub const OFPBAC_BAD_SET_LEN: u16 = 14;
pub const OFPBAC_BAD_SET_ARGUMENT: u16 = 15;

pub const OFPBIC_UNKNOWN_INST: u16 = 0;
pub const OFPBIC_UNSUP_INST: u16 = 1;
pub const OFPBIC_BAD_TABLE_ID: u16 = 2;
pub const OFPBIC_BAD_EXPERIMENTER: u16 = 5;
pub const OFPBIC_BAD_LEN: u16 = 7;

pub const OFPBMC_BAD_TYPE: u16 = 0;
pub const OFPBMC_BAD_LEN: u16 = 1;
pub const OFPBMC_BAD_WILDCARDS: u16 = 5;
pub const OFPBMC_BAD_FIELD: u16 = 6;
pub const OFPBMC_BAD_VALUE: u16 = 7;
pub const OFPBMC_BAD_MASK: u16 = 8;
pub const OFPBMC_BAD_PREREQ: u16 = 9;
pub const OFPBMC_DUP_FIELD: u16 = 10;

pub const OFPFMFC_UNKNOWN: u16 = 0;
pub const OFPFMFC_TABLE_FULL: u16 = 1;
pub const OFPFMFC_BAD_TABLE_ID: u16 = 2;
pub const OFPFMFC_OVERLAP: u16 = 3;
pub const OFPFMFC_BAD_TIMEOUT: u16 = 5;
pub const OFPFMFC_BAD_COMMAND: u16 = 6;
pub const OFPFMFC_BAD_FLAGS: u16 = 7;

pub const OFPGMFC_GROUP_EXISTS: u16 = 0;
pub const OFPGMFC_INVALID_GROUP: u16 = 1;
pub const OFPGMFC_WEIGHT_UNSUPPORTED: u16 = 2;
pub const OFPGMFC_OUT_OF_GROUPS: u16 = 3;
pub const OFPGMFC_CHAINING_UNSUPPORTED: u16 = 5;
pub const OFPGMFC_WATCH_UNSUPPORTED: u16 = 6;
pub const OFPGMFC_LOOP: u16 = 7;
pub const OFPGMFC_UNKNOWN_GROUP: u16 = 8;
pub const OFPGMFC_BAD_TYPE: u16 = 10;
pub const OFPGMFC_BAD_COMMAND: u16 = 11;
pub const OFPGMFC_BAD_BUCKET: u16 = 12;
pub const OFPGMFC_BAD_WATCH: u16 = 13;

pub const OFPPMFC_BAD_PORT: u16 = 0;
pub const OFPPMFC_BAD_HW_ADDR: u16 = 1;
pub const OFPPMFC_BAD_CONFIG: u16 = 2;

pub const OFPTMFC_BAD_TABLE: u16 = 0;

pub const OFPSCFC_BAD_FLAGS: u16 = 0;
pub const OFPSCFC_BAD_LEN: u16 = 1;

pub const OFPRRFC_BAD_ROLE: u16 = 2;

pub const OFPQOFC_BAD_PORT: u16 = 0;

pub const OFPCR_ROLE_NOCHANGE: u32 = 0;
pub const OFPCR_ROLE_EQUAL: u32 = 1;
pub const OFPCR_ROLE_MASTER: u32 = 2;
pub const OFPCR_ROLE_SLAVE: u32 = 3;

// dcnlab experimenter extension (see README.md "Experimenter message").
pub const DCNLAB_EXPERIMENTER_ID: u32 = 0x00dc_0001;
pub const DCNLAB_SET_GROUP_SELECT_MODE: u32 = 1;
pub const DCNLAB_GET_GROUP_SELECT_MODE: u32 = 2;
pub const DCNLAB_GROUP_SELECT_MODE_REPLY: u32 = 3;
/// Configure the ABQ ingress discipline of a port (switch_ext/README.md).
pub const DCNLAB_SET_PORT_ABQ: u32 = 4;
/// Set, ask and answer a group's (or the switch's) load balancer by name and options.
pub const DCNLAB_SET_GROUP_BALANCER: u32 = 5;
pub const DCNLAB_GET_GROUP_BALANCER: u32 = 6;
pub const DCNLAB_GROUP_BALANCER_REPLY: u32 = 7;
