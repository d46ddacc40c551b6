//! Stops from outside: SIGINT (Ctrl-C), SIGTERM and SIGHUP ask a long command to stop at its
//! next safe point and write what it has; the command then exits with 128 + the signal's number
//! (130, 143, 129), as a shell reports a process the signal ended, so a script never takes a
//! stopped run for a finished one. A second signal while the first is being answered ends the
//! process at once, with the same status.

use std::sync::atomic::{AtomicI32, Ordering};

use occam::base::heartbeat::StopFlag;

/// The first stop signal received (0: none).
static RECEIVED: AtomicI32 = AtomicI32::new(0);

/// SIGINT's number, the status base for a stop that is not a Unix signal (Windows' Ctrl-C).
const SIGINT: i32 = 2;

/// The signal that stopped the command, if one did.
pub fn received() -> Option<i32> {
    match RECEIVED.load(Ordering::SeqCst) {
        0 => None,
        n => Some(n),
    }
}

/// The exit status of a command stopped by signal `signal`: 128 + its number.
pub fn exit_status(signal: i32) -> u8 {
    u8::try_from(128 + signal).unwrap_or(128 + SIGINT as u8)
}

/// The signal's name, for messages.
pub fn name(signal: i32) -> &'static str {
    match signal {
        1 => "SIGHUP",
        2 => "SIGINT (Ctrl-C)",
        15 => "SIGTERM",
        _ => "a stop signal",
    }
}

/// Records `signal` and raises `flag` the first time; a second stop ends the process.
fn answer(signal: i32, flag: &StopFlag) {
    if RECEIVED
        .compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst)
        .is_ok()
    {
        flag.raise();
        return;
    }
    errln!();
    errln!(
        "second stop ({}): exiting now, without writing what the first stop was saving",
        name(signal)
    );
    std::process::exit(i32::from(exit_status(signal)));
}

/// Makes SIGINT, SIGTERM and SIGHUP raise `flag` (the command's stop) from now on. Installed
/// once per process; a failure to install is reported and the command runs on (it can still be
/// killed).
#[cfg(unix)]
pub fn stop_on_signals(flag: StopFlag) {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    use signal_hook::iterator::Signals;
    match Signals::new([SIGINT, SIGTERM, SIGHUP]) {
        // The handler only records the signal; this thread answers it outside the handler.
        Ok(mut signals) => {
            std::thread::spawn(move || {
                for signal in signals.forever() {
                    answer(signal, &flag);
                }
            });
        }
        Err(e) => errln!(
            "note: cannot listen for stop signals ({e}); Ctrl-C will kill the run without saving"
        ),
    }
}

/// [`stop_on_signals`] where there are no Unix signals: Ctrl-C, Ctrl-Break and closing the
/// console, each answered as SIGINT.
#[cfg(not(unix))]
pub fn stop_on_signals(flag: StopFlag) {
    if let Err(e) = ctrlc::set_handler(move || answer(SIGINT, &flag)) {
        errln!("note: cannot listen for Ctrl-C ({e}); it will kill the run without saving");
    }
}

/// Documented in every long command's help.
pub const STOP_HELP: &str = "A stop (Ctrl-C, SIGTERM, SIGHUP) ends the run at its next safe \
     point, writes what it has, and exits with 130 (SIGINT), 143 (SIGTERM) or 129 (SIGHUP); a \
     second one exits at once.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_128_plus_the_signal() {
        assert_eq!(exit_status(SIGINT), 130);
        assert_eq!(exit_status(15), 143);
        assert_eq!(exit_status(1), 129);
    }
}
