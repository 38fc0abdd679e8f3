//! The binary's command line: bad input gets a clear error and exit status 1, before any
//! socket is opened (the wire behaviour is tested from Python against both engines:
//! tests/unit/test_uc3_agent_trust.py, tests/network/test_uc3_agent_engines.py).

use std::process::Command;

fn run(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_dcnlab-uc3-agentd"))
        .args(args)
        .output()
        .expect("the binary runs");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

fn secret_file(name: &str, content: &str) -> String {
    let path = std::env::temp_dir().join(format!("uc3-agentd-cli-{}-{name}", std::process::id()));
    std::fs::write(&path, content).unwrap();
    path.display().to_string()
}

#[test]
fn help_prints_the_usage() {
    let (code, text) = run(&["--help"]);
    assert_eq!(code, 0);
    assert!(
        text.contains("--secret-fd") && text.contains("--clamps-map"),
        "{text}"
    );
}

#[test]
fn bad_input_is_a_clear_error() {
    let good = secret_file("good", "0123456789abcdef0123456789abcdef\n");
    let short = secret_file("short", "tooshort");
    let maps = [
        "--clamps-map",
        "/nonexistent/pins/clamps",
        "--flows-map",
        "/nonexistent/pins/flows",
        "--stats-map",
        "/nonexistent/pins/stats",
    ];
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--port", "1", "--cgroup", "/cg"],
            "give --secret-fd or --secret-file",
        ),
        (vec!["--bogus", "1"], "unknown option --bogus"),
        (vec!["--port"], "--port needs a value"),
        (
            vec!["--port", "x", "--cgroup", "/cg", "--secret-file", &good],
            "bad --port",
        ),
        (
            vec!["--port", "1", "--secret-file", &good],
            "--cgroup is required",
        ),
        (
            vec!["--port", "1", "--cgroup", "/cg", "--secret-fd", "987"],
            "--secret-fd 987: no such open file descriptor",
        ),
        (
            [
                &["--port", "1", "--cgroup", "/cg", "--secret-file", &short][..],
                &maps[..],
            ]
            .concat(),
            "shared secret must be at least 16 bytes",
        ),
        (
            [
                &["--port", "1", "--cgroup", "/cg", "--secret-file", &good][..],
                &maps[..],
            ]
            .concat(),
            "--clamps-map: BPF_OBJ_GET /nonexistent/pins/clamps",
        ),
        (
            vec![
                "--port",
                "1",
                "--cgroup",
                "/cg",
                "--secret-file",
                &good,
                "--interval",
                "0",
            ],
            "--interval \"0\": give a positive number of seconds",
        ),
    ];
    for (args, want) in cases {
        let (code, text) = run(&args);
        assert_eq!(code, 1, "{args:?}: {text}");
        assert!(text.contains(want), "{args:?}: wanted {want:?} in {text}");
    }
    for path in [good, short] {
        std::fs::remove_file(path).unwrap();
    }
}
