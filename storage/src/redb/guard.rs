//! Every call into redb that can meet untrusted bytes runs inside [`guard`], which turns a panic
//! raised inside redb's code into [`Error::Corrupted`] with table `"redb"`. A panic raised in
//! Cairn's own code inside a guard (an `assert!` in the writer's apply, say) is a Cairn bug, not
//! damage: it is printed by the previous hook and goes on unwinding, as any other panic does.
//!
//! Why: redb 4.5 trusts the structure of the pages it reads. A damaged page can make it panic
//! instead of returning an error (seen with bit flips: "Malformed allocator state" in
//! `page_manager.rs` on open, out-of-range slices in `btree_base.rs`, `table_tree_base.rs` and
//! `tuple_types.rs`, an `unwrap` in `types.rs`, an `unreachable!` in `btree.rs`). Untrusted bytes
//! must become errors, never panics, so the store catches the unwind at its boundary with redb.
//!
//! The panic message: a panic hook is installed once per process (on the first guarded call). It
//! wraps whatever hook was installed before it and, only for a panic raised inside redb's source
//! on a thread that is inside a guard, records the message and location for the error instead of
//! printing it (and logs it through `tracing` at error level). Every other panic goes to the
//! previous hook unchanged. "Inside redb's source" is decided by the panic's location: a file of
//! the `redb-<version>` package (redb's `unwrap`s and slice indexing report redb's own lines).
//! A panic without a location is taken for redb's, the safe side for untrusted bytes. An application that installs its own hook later replaces this one: guarded panics
//! are then still caught and reported as errors, but also printed by that hook.
//!
//! After a guarded panic, redb's in-memory state for that database may be inconsistent (a
//! half-built page, a poisoned internal lock). Reads return errors for whatever they touch; the
//! writer treats a panic during a commit like a failed commit (the store is poisoned, reopen to
//! recover). A panic inside redb while unwinding from another one would abort the process; redb's
//! drop paths only release locks and counters, which is not where damaged bytes are parsed.

use std::cell::{Cell, RefCell};
use std::panic::{AssertUnwindSafe, PanicHookInfo, catch_unwind};
use std::sync::Once;

use crate::codec::table;
use crate::error::Error;

thread_local! {
    /// How many guards this thread is inside (guards nest: an open calls the meta check).
    static DEPTH: Cell<u32> = const { Cell::new(0) };
    /// The last guarded panic on this thread, taken by the guard that caught it.
    static CAUGHT: RefCell<Option<Caught>> = const { RefCell::new(None) };
}

/// What the hook saw of a guarded panic.
struct Caught {
    /// Message and location.
    message: String,
    /// Raised in Cairn's own code: a bug, which must not pass for damage.
    ours: bool,
}

static HOOK: Once = Once::new();

/// Runs `f`, turning a panic inside it into [`Error::Corrupted`] (table `"redb"`, the panic
/// message and location in `detail`). `op` names the operation for the error and the log.
///
/// # Errors
///
/// `f`'s own error, or the corruption error if it panicked.
pub(crate) fn guard<T>(op: &'static str, f: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
    HOOK.call_once(install_hook);
    DEPTH.with(|depth| depth.set(depth.get() + 1));
    let outcome = catch_unwind(AssertUnwindSafe(f));
    DEPTH.with(|depth| depth.set(depth.get().saturating_sub(1)));
    match outcome {
        Ok(result) => result,
        Err(payload) => {
            let caught = CAUGHT.with(|caught| caught.borrow_mut().take());
            let message = match caught {
                Some(Caught { ours: true, .. }) => std::panic::resume_unwind(payload),
                Some(Caught { message, .. }) => message,
                None => payload_text(payload.as_ref()).to_string(),
            };
            // The caller gets the error (and reports it); a warning here, so that a read retried
            // over a damaged file does not print the same error once per attempt.
            tracing::warn!(op, %message, "a panic inside redb was turned into a corruption error");
            Err(panicked(op, &message))
        }
    }
}

/// The error a guarded panic becomes.
pub(crate) fn panicked(op: &'static str, message: &str) -> Error {
    Error::corrupted(table::REDB, format!("redb panicked during {op} (a damaged page?): {message}"))
}

fn install_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info: &PanicHookInfo<'_>| {
        // `try_with`: the thread-locals may already be gone if the thread is exiting.
        let guarded = DEPTH.try_with(Cell::get).is_ok_and(|depth| depth > 0);
        if !guarded {
            previous(info);
            return;
        }
        let ours = info.location().is_some_and(|at| !in_redb(at.file()));
        if ours {
            // A bug of ours: shown like any panic, and the guard lets it unwind on.
            previous(info);
        }
        let text = payload_text(info.payload());
        let message = match info.location() {
            Some(at) => format!("{text} at {}:{}", short_path(at.file()), at.line()),
            None => text.to_string(),
        };
        let _ = CAUGHT.try_with(|caught| *caught.borrow_mut() = Some(Caught { message, ours }));
    }));
}

/// Whether a source file is redb's: cargo unpacks a registry package as `<name>-<version>/`, so
/// redb's files sit under a `redb-<digit>...` directory.
fn in_redb(file: &str) -> bool {
    file.split(['/', '\\']).any(|part| {
        part.strip_prefix("redb-").is_some_and(|v| v.starts_with(|c: char| c.is_ascii_digit()))
    })
}

fn payload_text(payload: &(dyn std::any::Any + Send)) -> &str {
    if let Some(text) = payload.downcast_ref::<&str>() {
        text
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text
    } else {
        "a panic without a message"
    }
}

/// `.../redb-4.5.0/src/tree_store/btree.rs` -> `redb-4.5.0/src/tree_store/btree.rs`.
fn short_path(file: &str) -> &str {
    file.find("redb-").map_or(file, |at| &file[at..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_in_redbs_source_is_damage_and_one_in_ours_is_a_bug() {
        let redb = "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/redb-4.5.0/src/\
                    tree_store/btree.rs";
        assert!(in_redb(redb));
        assert!(in_redb(r"C:\cargo\registry\src\x\redb-4.5.0\src\types.rs"));
        assert!(!in_redb("storage/src/redb/apply.rs"), "our redb backend is not redb");
        assert!(!in_redb("/work/main/storage/src/redb/guard.rs"));
        assert!(!in_redb("/x/redb-derive/src/lib.rs"), "another package");
    }

    /// An `assert!` of Cairn's own inside a guard (the writer applies a batch inside one) is a
    /// bug: it unwinds through the guard instead of being reported as a damaged page.
    #[test]
    fn our_own_panic_unwinds_through_the_guard() {
        let unwound = std::panic::catch_unwind(|| {
            let _: Result<(), Error> = guard("test op", || panic!("lsn 7 not above 9"));
        });
        let payload = unwound.expect_err("the panic went on");
        assert_eq!(payload_text(payload.as_ref()), "lsn 7 not above 9");
        assert_eq!(DEPTH.with(Cell::get), 0, "depth restored");
        assert!(CAUGHT.with(|c| c.borrow().is_none()), "nothing left behind");
    }

    #[test]
    fn a_caught_panic_becomes_a_corruption_error_with_its_message() {
        let error = panicked("test op", "Malformed allocator state at redb-4.5.0/src/x.rs:3");
        match error {
            Error::Corrupted { table: "redb", detail, .. } => {
                assert!(detail.contains("Malformed allocator state"), "{detail}");
                assert!(detail.contains("test op"), "{detail}");
                assert!(detail.contains("redb-4.5.0/src/x.rs:3"), "the location is kept: {detail}");
            }
            other => panic!("expected a corruption error, got {other:?}"),
        }
    }

    #[test]
    fn results_pass_through_and_guards_nest() {
        assert_eq!(guard("outer", || guard("inner", || Ok(7))).ok(), Some(7));
        let inner: Result<(), Error> =
            guard("outer", || guard("inner", || Err(Error::Closed)).or(Err(Error::ReadOnly)));
        assert!(matches!(inner, Err(Error::ReadOnly)));
        assert_eq!(DEPTH.with(Cell::get), 0, "depth restored");
    }
}
