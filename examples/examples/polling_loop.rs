//! `cargo run --example polling_loop`: see `cairn_examples::polling_loop`.
#![allow(clippy::print_stdout, reason = "an example prints its result")]

use cairn_examples::polling_loop::{FEED_ITEMS, POLLS_PER_RUN};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let s = cairn_examples::polling_loop::run(&dir.path().join("poller.db")).await?;
    println!(
        "a feed of {FEED_ITEMS} items, polled 2 at a time, a new thread every {POLLS_PER_RUN} polls"
    );
    for (link, events) in s.links.iter().zip(&s.events) {
        println!("{link}: {events} events");
    }
    println!(
        "{} ended {}: cursor {}, {} items seen in {} polls",
        s.links.last().map_or("?", String::as_str),
        s.status,
        s.last.cursor,
        s.last.seen,
        s.last.polls
    );
    Ok(())
}
