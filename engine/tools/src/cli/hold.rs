//! `cairn __hold --db FILE` (internal, hidden): opens the database for writing and holds it until
//! stdin closes. The CLI's tests use it to have "another process" hold a file; it runs nothing.

use std::io::Read as _;

use super::common::{Common, open_writable, print_text};

pub(super) async fn hold(args: Common) -> anyhow::Result<()> {
    let engine = open_writable(&args.db, &[]).await?;
    // The line tells the parent the file is held: it can go on without sleeping.
    print_text(&format!("holding {}", args.db.display()));
    tokio::task::spawn_blocking(|| {
        let mut sink = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut sink);
    })
    .await?;
    engine.shutdown().await;
    Ok(())
}
