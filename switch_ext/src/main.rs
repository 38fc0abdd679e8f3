use std::process::ExitCode;

use dcnlab_switch::cli::{self, Command};
use dcnlab_switch::datapath::VERSION;
use dcnlab_switch::{bench, selftest, switch};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cmd = match cli::parse_args(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("dcnlab-switch: error: {e}\n(try --help)");
            return ExitCode::from(2);
        }
    };
    match cmd {
        Command::Help => {
            print!("{}", cli::USAGE);
            ExitCode::SUCCESS
        }
        Command::Check => ExitCode::SUCCESS,
        Command::Version => {
            println!("dcnlab-switch {VERSION}");
            ExitCode::SUCCESS
        }
        Command::SelftestEncode(path) => match selftest::write_samples(&path) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("dcnlab-switch: error: {path}: {e}");
                ExitCode::FAILURE
            }
        },
        Command::BenchLookup(sizes) => {
            println!("{}", bench::lookup_report(&sizes));
            ExitCode::SUCCESS
        }
        Command::Run(cfg) => {
            switch::install_signal_handlers();
            let mut sw = match switch::Switch::new(&cfg) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("dcnlab-switch: error: {e}");
                    return ExitCode::from(2);
                }
            };
            match sw.run() {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("dcnlab-switch: error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}
