//! `guidepost tools serve`: serves tools written as Python functions, by running the
//! `guidepost.tools` module of the Python package (`python -m guidepost.tools`) in place of
//! this process.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{Context, bail};

/// What `guidepost tools serve` was asked for.
pub struct ServeToolsOptions {
    /// `.py` files or dotted module names.
    pub modules: Vec<String>,
    /// Address to listen on.
    pub host: String,
    /// Port (0: a free one).
    pub port: u16,
    /// Seconds after which a call of a tool without a timeout of its own fails.
    pub timeout: Option<f64>,
    /// Log only failed calls.
    pub quiet: bool,
    /// The Python interpreter to run (default: the one beside this executable, else `python3`).
    pub python: Option<PathBuf>,
}

/// Replaces this process with the Python tool server (on Unix; elsewhere waits for it).
pub fn serve(options: ServeToolsOptions) -> anyhow::Result<ExitCode> {
    let python = find_python(options.python.as_deref())?;
    let mut command = Command::new(&python);
    if let Some(package) = checkout_package() {
        let mut paths = vec![package];
        paths.extend(std::env::var_os("PYTHONPATH").iter().flat_map(std::env::split_paths));
        command.env("PYTHONPATH", std::env::join_paths(paths).context("PYTHONPATH")?);
    }
    let importable = Command::new(&python)
        .args(["-c", "import guidepost.tools"])
        .envs(command.get_envs().filter_map(|(k, v)| v.map(|v| (k.to_owned(), v.to_owned()))))
        .output()
        .with_context(|| format!("cannot run {}", python.display()))?;
    if !importable.status.success() {
        bail!(
            "{} cannot import the `guidepost` Python package ({}): install it (pip install of the \
             wheel scripts/wheel.sh builds), or name another interpreter with --python or GUIDEPOST_PYTHON",
            python.display(),
            String::from_utf8_lossy(&importable.stderr).trim().lines().last().unwrap_or("no output")
        );
    }
    command.args(["-m", "guidepost.tools"]).args(&options.modules);
    command.args(["--host", &options.host, "--port", &options.port.to_string()]);
    if let Some(timeout) = options.timeout {
        command.args(["--timeout", &timeout.to_string()]);
    }
    if options.quiet {
        command.arg("--quiet");
    }
    run(command, &python)
}

#[cfg(unix)]
fn run(mut command: Command, python: &Path) -> anyhow::Result<ExitCode> {
    use std::os::unix::process::CommandExt;
    // Signals (Ctrl-C, SIGTERM) then reach the server itself, which stops gracefully.
    let error = command.exec();
    Err(error).with_context(|| format!("cannot run {}", python.display()))
}

#[cfg(not(unix))]
fn run(mut command: Command, python: &Path) -> anyhow::Result<ExitCode> {
    let status = command.status().with_context(|| format!("cannot run {}", python.display()))?;
    Ok(ExitCode::from(status.code().and_then(|c| u8::try_from(c).ok()).unwrap_or(1)))
}

/// The interpreter: the one named, `GUIDEPOST_PYTHON`, the one of the virtual environment
/// this executable was installed into (pip puts both in its `bin`), or `python3` on the PATH.
fn find_python(named: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(path) = named {
        return Ok(path.to_path_buf());
    }
    if let Some(path) = std::env::var_os("GUIDEPOST_PYTHON").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(path));
    }
    let beside = std::env::current_exe().ok().and_then(|exe| exe.parent().map(Path::to_path_buf));
    let on_path = std::env::var_os("PATH").unwrap_or_default();
    for dir in beside.into_iter().chain(std::env::split_paths(&on_path)) {
        for name in ["python3", "python"] {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return Ok(candidate);
            }
        }
    }
    bail!("no Python interpreter: none beside {} and no python3 on the PATH (--python names one)", exe_name())
}

fn exe_name() -> String {
    std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_else(|_| "guidepost".into())
}

/// The repository's `python` folder when this executable is a build inside a checkout
/// (`<checkout>/target/<profile>/guidepost`), so the package is the one of the same version.
fn checkout_package() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    exe.ancestors()
        .skip(1)
        .take(4)
        .find(|dir| dir.join("Cargo.toml").is_file() && dir.join("python/guidepost/tools.py").is_file())
        .map(|dir| dir.join("python"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_named_interpreter_wins() {
        let python = find_python(Some(Path::new("/opt/py/bin/python3.12"))).unwrap();
        assert_eq!(python, PathBuf::from("/opt/py/bin/python3.12"));
    }

    #[test]
    fn a_build_inside_the_checkout_finds_the_package_of_the_same_version() {
        // Unit tests run from target/debug/deps inside this checkout.
        let package = checkout_package().expect("the checkout's python folder");
        assert!(package.join("guidepost/__init__.py").is_file(), "{}", package.display());
    }
}
