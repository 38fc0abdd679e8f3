//! `flowcell`: Presto-style flowcells (He et al., SIGCOMM 2015). Each flow is cut into
//! cells of `cell=` bytes of its frames (default 64 KiB), and each cell takes the next
//! candidate in turn: a flow's bytes go round-robin over the paths, one cell at a time.
//! A packet is never split: a cell ends with the packet that fills it to `cell` bytes or
//! more, and the next packet starts the next cell.
//!
//! Presto chooses the whole path at the sender's edge; here every switch with a select
//! group cuts the flows it sees. That gives the same rotation over whole paths: a switch
//! one tier up sees, in order, the cells its parent sent it and counts the same bytes, so
//! it moves on after each of them, and cell k of a flow crosses a fat-tree's edge uplink
//! k mod 2 and that aggregation switch's uplink (k div 2) mod 2: the four paths in turn.
//! A flow's first cell takes the candidate its flow hash names, so flows start spread.
//!
//! The per-flow state (the cell's bytes so far and the cells started) lives in a
//! direct-mapped table by flow hash (`table=`, default 4096 entries) tagged with the
//! hash: a flow that lands on another flow's entry starts afresh there. The receivers'
//! reordering is left to Linux TCP (Presto's receiver-side resequencing is not modelled).

use super::flowlet::{table_option, DEFAULT_TABLE};
use super::{Balancer, Pick};
use crate::spec::unknown_option;
use crate::units::parse_size;

pub const NAME: &str = "flowcell";
const OPTIONS: &[&str] = &["cell", "table"];

const DEFAULT_CELL: u64 = 64 * 1024;

#[derive(Debug, Clone, Copy, Default)]
struct Entry {
    flow_hash: u64,
    /// Bytes of the current cell so far.
    filled: u64,
    /// Cells the flow has started on this entry (the first is 1).
    cells: u64,
    used: bool,
}

#[derive(Debug)]
pub struct Flowcell {
    cell_bytes: u64,
    table: Vec<Entry>,
    /// Cells started, first cells of flows included.
    pub cells: u64,
    /// Cells sent to another bucket than the flow's cell before.
    pub path_changes: u64,
    /// The bucket of each entry's current cell (kept apart: it is only read at a cell's
    /// start, to count path changes).
    last_bucket: Vec<u32>,
}

impl Flowcell {
    pub fn new(cell_bytes: u64, table: usize) -> Flowcell {
        Flowcell {
            cell_bytes,
            table: vec![Entry::default(); table],
            cells: 0,
            path_changes: 0,
            last_bucket: vec![0; table],
        }
    }
}

impl Balancer for Flowcell {
    fn kind(&self) -> &'static str {
        NAME
    }

    fn needs_flow_hash(&self) -> bool {
        true
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("cells", self.cells), ("path_changes", self.path_changes)]
    }

    fn choose(&mut self, pick: &mut Pick<'_>) -> usize {
        let slot = (pick.flow_hash % self.table.len() as u64) as usize;
        let e = &mut self.table[slot];
        let continuing = e.used && e.flow_hash == pick.flow_hash;
        if !continuing {
            *e = Entry { flow_hash: pick.flow_hash, filled: 0, cells: 0, used: true };
        }
        let starts_cell = e.filled == 0;
        if starts_cell {
            e.cells += 1;
        }
        let n = pick.candidates.len() as u64;
        // Cell 1 on the flow's hashed candidate, each next cell on the one after it.
        let i = ((pick.flow_hash % n + e.cells - 1) % n) as usize;
        e.filled += pick.bytes as u64;
        if e.filled >= self.cell_bytes {
            e.filled = 0;
        }
        if starts_cell {
            self.cells += 1;
            let bucket = pick.candidates[i].bucket as u32;
            if continuing && self.last_bucket[slot] != bucket {
                self.path_changes += 1;
            }
            self.last_bucket[slot] = bucket;
        }
        i
    }
}

pub fn build(opts: &[(String, String)]) -> Result<Box<dyn Balancer>, String> {
    let mut cell = DEFAULT_CELL;
    let mut table = DEFAULT_TABLE;
    for (k, v) in opts {
        match k.as_str() {
            "cell" => {
                cell = match parse_size(v).map_err(|e| format!("option cell={v}: {e}"))? {
                    (None, Some(n)) if n > 0 => n as u64,
                    (None, _) => return Err(format!("option cell={v}: must be positive")),
                    _ => return Err(format!("option cell={v}: a cell is bytes (e.g. 64KiB), not packets")),
                }
            }
            "table" => table = table_option(v)?,
            _ => return Err(unknown_option(k, OPTIONS)),
        }
    }
    Ok(Box::new(Flowcell::new(cell, table)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::Rng;
    use crate::lb::testing::{candidates, choose_sized};
    use crate::lb::NoLoads;

    const KB: usize = 1024;

    /// The buckets a flow's `packets` frames of `bytes` each take.
    fn path(b: &mut Flowcell, n: usize, flow: u64, packets: usize, bytes: usize) -> Vec<usize> {
        let c = candidates(&vec![1; n]);
        let mut rng = Rng::new(1);
        (0..packets).map(|i| choose_sized(b, &c, flow, i as u64, bytes, &NoLoads, &mut rng)).collect()
    }

    #[test]
    fn a_flow_moves_to_the_next_bucket_every_cell() {
        // 1 KiB frames, 64 KiB cells: 64 packets per cell; flow hash 5 starts on 5 % 4 = 1.
        let mut b = Flowcell::new(64 * KB as u64, 16);
        let p = path(&mut b, 4, 5, 64 * 6, KB);
        let cells: Vec<usize> = p.chunks(64).map(|c| c[0]).collect();
        assert_eq!(cells, vec![1, 2, 3, 0, 1, 2]);
        assert!(p.chunks(64).all(|c| c.iter().all(|&x| x == c[0])), "a cell stays on one bucket");
        assert_eq!((b.cells, b.path_changes), (6, 5));
    }

    #[test]
    fn a_cell_ends_with_the_packet_that_fills_it() {
        // 1500-byte frames and 4000-byte cells: 3 packets (4500 bytes) per cell.
        let mut b = Flowcell::new(4000, 16);
        let p = path(&mut b, 2, 0, 9, 1500);
        assert_eq!(p, vec![0, 0, 0, 1, 1, 1, 0, 0, 0]);
    }

    #[test]
    fn two_tiers_that_cut_the_same_flow_rotate_over_every_path() {
        // An edge switch with 2 uplinks, each to a switch with 2 uplinks of its own:
        // cell k takes edge uplink k mod 2 and, above it, uplink (k div 2) mod 2.
        let mut edge = Flowcell::new(4 * KB as u64, 16);
        let mut above = [Flowcell::new(4 * KB as u64, 16), Flowcell::new(4 * KB as u64, 16)];
        let c = candidates(&[1, 1]);
        let mut rng = Rng::new(1);
        let mut paths = Vec::new();
        for i in 0..32u64 {
            let up = choose_sized(&mut edge, &c, 2, i, KB, &NoLoads, &mut rng);
            let core = choose_sized(&mut above[up], &c, 2, i, KB, &NoLoads, &mut rng);
            paths.push((up, core));
        }
        let cells: Vec<(usize, usize)> = paths.chunks(4).map(|c| c[0]).collect();
        assert_eq!(cells, vec![(0, 0), (1, 0), (0, 1), (1, 1), (0, 0), (1, 0), (0, 1), (1, 1)]);
    }

    #[test]
    fn flows_keep_their_own_cells_and_a_newcomer_on_an_entry_starts_afresh() {
        let c = candidates(&[1, 1]);
        let mut rng = Rng::new(1);
        let mut b = Flowcell::new(2 * KB as u64, 16);
        // Flows 0 and 1 interleaved: each moves on after its own 2 KiB.
        let p: Vec<(usize, usize)> = (0..4u64)
            .map(|i| {
                let a = choose_sized(&mut b, &c, 0, i, KB, &NoLoads, &mut rng);
                (a, choose_sized(&mut b, &c, 1, i, KB, &NoLoads, &mut rng))
            })
            .collect();
        assert_eq!(p, vec![(0, 1), (0, 1), (1, 0), (1, 0)]);
        // Flow 16 lands on flow 0's entry (16 % 16): it starts its own first cell there.
        let cells = b.cells;
        choose_sized(&mut b, &c, 16, 9, KB, &NoLoads, &mut rng);
        assert_eq!(b.cells, cells + 1);
        assert_eq!(b.path_changes, 2, "a newcomer's first cell is no path change");
    }

    #[test]
    fn options_are_checked() {
        let b = |s: &str| crate::lb::build(&crate::spec::NamedSpec::parse(s).unwrap()).map(|_| ());
        assert!(b("flowcell/cell=16KB/table=64").is_ok());
        assert_eq!(
            b("flowcell/cell=0b").unwrap_err(),
            "load balancer 'flowcell': option cell=0b: must be positive"
        );
        assert!(b("flowcell/cell=40p").unwrap_err().ends_with("a cell is bytes (e.g. 64KiB), not packets"));
        assert!(b("flowcell/cell=lots")
            .unwrap_err()
            .starts_with("load balancer 'flowcell': option cell=lots: "));
        assert!(b("flowcell/table=0").unwrap_err().contains("expected 1..=1048576 entries"));
        assert_eq!(
            b("flowcell/size=1").unwrap_err(),
            "load balancer 'flowcell': unknown option 'size' (known: cell, table)"
        );
    }
}
