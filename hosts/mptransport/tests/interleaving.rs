//! Property: however the subflows' byte streams interleave, and whichever segments are
//! sent on several subflows, the receiver delivers exactly the original bytes.

use dcnlab_mp::pattern;
use dcnlab_mp::receiver::RxConn;
use dcnlab_mp::wire::{self, Decoder, Frame, Hello};
use proptest::prelude::*;

const SEED: u64 = 9;

fn hello(sub: u8, total: u64) -> Hello {
    Hello {
        conn_id: 5,
        subflow: sub,
        seed: SEED,
        total,
        window: 1 << 20,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn any_interleaving_reassembles(
        cuts in prop::collection::vec(1usize..3000, 1..40),
        carriers in prop::collection::vec(1u8..8, 40),
        order in prop::collection::vec(any::<u16>(), 40),
        chunks in prop::collection::vec((0usize..3, 1usize..5000), 1..400),
    ) {
        // segments of the stream
        let mut segs = Vec::new();
        let mut dsn = 0u64;
        for c in &cuts {
            segs.push((dsn, *c as u64));
            dsn += *c as u64;
        }
        let total = dsn;
        let mut original = vec![0u8; total as usize];
        pattern::fill(SEED, 0, &mut original);
        // each segment goes on one or more of 3 subflows, in a shuffled order per subflow
        let mut streams: Vec<Vec<u8>> = (0..3).map(|i| {
            let mut v = Vec::new();
            wire::encode(&Frame::Hello(hello(i as u8, total)), &mut v);
            v
        }).collect();
        let mut idx: Vec<usize> = (0..segs.len()).collect();
        idx.sort_by_key(|i| order[*i % order.len()]);
        for i in idx {
            let (d, l) = segs[i];
            for (sf, stream) in streams.iter_mut().enumerate() {
                if carriers[i % carriers.len()] & (1 << sf) != 0 {
                    wire::encode(&Frame::Data { dsn: d, payload: original[d as usize..(d + l) as usize].to_vec() }, stream);
                }
            }
        }
        // feed the streams in random chunks, then whatever is left
        let mut conn: Option<RxConn> = None;
        let mut decs: Vec<Decoder> = (0..3).map(|_| Decoder::new()).collect();
        let mut pos = [0usize; 3];
        let mut reply = Vec::new();
        let mut feed = |sf: usize, n: usize, conn: &mut Option<RxConn>, decs: &mut Vec<Decoder>, pos: &mut [usize; 3]| {
            let end = (pos[sf] + n).min(streams[sf].len());
            decs[sf].push(&streams[sf][pos[sf]..end]);
            pos[sf] = end;
            while let Some(f) = decs[sf].next_frame().unwrap() {
                match (&mut *conn, f) {
                    (None, Frame::Hello(h)) => {
                        let mut c = RxConn::new(&h).unwrap();
                        c.sink = Some(Vec::new());
                        *conn = Some(c);
                    }
                    (Some(c), f) => c.on_frame(sf as u8, f, &mut reply).unwrap(),
                    (None, f) => panic!("frame before HELLO: {f:?}"),
                }
            }
        };
        for (sf, n) in &chunks {
            feed(*sf, *n, &mut conn, &mut decs, &mut pos);
        }
        for sf in 0..3 {
            feed(sf, usize::MAX / 2, &mut conn, &mut decs, &mut pos);
        }
        let c = conn.unwrap();
        prop_assert!(c.reasm.complete());
        prop_assert_eq!(c.sink.as_ref().unwrap(), &original);
        prop_assert!(c.intact);
        let copies: u64 = c.per_subflow.iter().sum();
        prop_assert_eq!(copies - total, c.reasm.dup_bytes);
    }
}
