//! The `guidepost` command.

mod check;
mod discover;
mod graph;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

/// Guidepost: agents that follow your business rules, and a simulator that tests them.
#[derive(Parser)]
#[command(name = "guidepost", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Output style of `check`.
#[derive(Clone, Copy, ValueEnum)]
enum CheckFormat {
    /// Messages with source excerpts, for people.
    Human,
    /// One JSON document, for tools and editors.
    Json,
}

/// Diagram syntax of `graph`.
#[derive(Clone, Copy, ValueEnum)]
enum GraphFormat {
    /// Mermaid (paste into Markdown, GitHub renders it).
    Mermaid,
    /// Graphviz DOT (`dot -Tsvg`).
    Dot,
}

#[derive(Subcommand)]
enum Command {
    /// Validate agent definitions and report every problem with its file:line:column.
    ///
    /// PATH is a definition file (YAML or JSON), an agent directory (one that holds
    /// agent.yaml: all files under it define one agent) or a directory of agents.
    /// Exits with 0 when there are no errors, 1 otherwise.
    Check {
        /// Files or directories to check.
        #[arg(required = true, value_name = "PATH")]
        paths: Vec<PathBuf>,
        /// Output format.
        #[arg(long, value_enum, default_value = "human")]
        format: CheckFormat,
        /// Treat warnings as errors.
        #[arg(long)]
        deny_warnings: bool,
    },
    /// Draw a journey as a diagram.
    ///
    /// JOURNEY is a journey id, or AGENT/JOURNEY when several agents are loaded.
    /// With --projection, draws the node guidelines the engine matches instead of the
    /// states.
    Graph {
        /// The journey.
        #[arg(value_name = "JOURNEY")]
        journey: String,
        /// Where the agents are.
        #[arg(long = "agent", short = 'a', value_name = "PATH", default_value = ".")]
        paths: Vec<PathBuf>,
        /// Diagram syntax.
        #[arg(long, value_enum, default_value = "mermaid")]
        format: GraphFormat,
        /// Draw the projected node guidelines.
        #[arg(long)]
        projection: bool,
    },
    /// Print the JSON Schema of the definition format.
    ///
    /// Point your editor at it for completion and inline checks, e.g. with a first line
    /// `# yaml-language-server: $schema=path/to/agent.schema.json`.
    Schema,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Check { paths, format, deny_warnings } => {
            check::run(&paths, matches!(format, CheckFormat::Json), deny_warnings)
        }
        Command::Graph { journey, paths, format, projection } => {
            let format = match format {
                GraphFormat::Mermaid => guidepost_core::graph::Format::Mermaid,
                GraphFormat::Dot => guidepost_core::graph::Format::Dot,
            };
            graph::run(&journey, &paths, format, projection)
        }
        Command::Schema => serde_json::to_string_pretty(guidepost_core::definition::json_schema())
            .map(|s| {
                println!("{s}");
                ExitCode::SUCCESS
            })
            .map_err(Into::into),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(2)
        }
    }
}
