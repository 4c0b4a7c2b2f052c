//! Standard output that survives a closed pipe.
//!
//! `guidepost schema | head` closes the pipe after a few lines; `println!` would panic on
//! the next write. Everything the command prints goes through [`write`] instead, which ends
//! the process quietly (status 0, as the reader asked for no more) when the reader is gone.

use std::io::Write;

/// Writes `args` to standard output and flushes it; a closed pipe ends the process.
#[allow(clippy::print_stdout)]
pub fn write(args: std::fmt::Arguments<'_>) {
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_fmt(args).and_then(|()| stdout.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: cannot write to standard output: {e}");
        std::process::exit(2);
    }
}

/// `print!` through [`write`].
#[allow(unused_macros)] // the library half of the crate prints whole lines only
macro_rules! out {
    ($($arg:tt)*) => { $crate::out::write(format_args!($($arg)*)) };
}

/// `println!` through [`write`].
macro_rules! outln {
    () => { $crate::out::write(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::out::write(format_args!("{}\n", format_args!($($arg)*))) };
}
