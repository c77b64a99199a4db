//! `cairn init --db FILE`: makes an empty database where there is nothing, or in a zero-length
//! file, which every other command refuses to touch (it may be a placeholder someone else
//! made); anything else at the path is refused as it would be by any command.

use super::common::{Common, fail, print_json, print_text};
use super::{EXIT_FAILED, EXIT_OPEN};

pub(super) async fn init(args: Common) -> anyhow::Result<()> {
    if cairn::admin::is_postgres_url(&args.db) {
        // Connecting creates Cairn's tables in a database that has none.
        let engine = cairn::Engine::builder(&args.db)
            .read_only()
            .open()
            .await
            .map_err(|e| super::common::open_error(&args.db, e))?;
        engine.shutdown().await;
        let shown = args.db.display().to_string();
        return if args.json {
            print_json(&serde_json::json!({ "initialised": shown }))
        } else {
            print_text(&format!("initialised Cairn's tables in {shown}"));
            Ok(())
        };
    }
    let db = args.db.clone();
    let made = tokio::task::spawn_blocking(move || {
        cairn_storage::RedbStore::initialise(&db, cairn_storage::Options::default())
            .and_then(cairn_storage::RedbStore::close)
    })
    .await?;
    let shown = args.db.display();
    match made {
        Ok(()) if args.json => print_json(&serde_json::json!({ "initialised": shown.to_string() })),
        Ok(()) => {
            print_text(&format!("initialised an empty Cairn database at {shown}"));
            Ok(())
        }
        Err(cairn_storage::Error::Invalid { detail }) => {
            Err(fail(EXIT_FAILED, format!("{detail}: `cairn init` only makes a new database")))
        }
        Err(e @ (cairn_storage::Error::NotAFile { .. } | cairn_storage::Error::NotFound(_))) => {
            Err(fail(EXIT_OPEN, format!("{e}; nothing was written")))
        }
        Err(e) => Err(e.into()),
    }
}
