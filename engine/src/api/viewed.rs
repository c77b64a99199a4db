//! Reads of a thread's log for the read-only tool surfaces, through the engine's
//! [`SealedView`]: each event with its body opened, or a placeholder where the body is sealed
//! with a key the view does not hold (`docs/encryption.md`, "Tools"). Re-exported by
//! `cairn::admin`; nothing the engine drives reads through here.

use cairn_storage::{Checkpoint, CheckpointId, Event, PayloadRef, Seq, ThreadId};

use super::engine::Engine;
use crate::core::codec::{self, Recorded};
use crate::core::event::Body;
use crate::core::restore::offloaded;
use crate::error::Error;
use crate::sealing::{SealedView, Viewed};

/// One event as a read-only view reads it: its stored header (bookmark, kind, node, status,
/// summary; its data as stored) and its body, decoded or a placeholder.
#[derive(Debug, Clone)]
pub struct ViewedEvent {
    /// The event as stored (its data sealed when `body` is a placeholder).
    pub event: Event,
    /// Its decoded body (a `checkpoint_created` one naming the checkpoint that covers it), or
    /// the placeholder of a body sealed with a key the view lacks.
    pub body: Viewed<Body>,
}

/// The read-only view of `engine`'s store for the tools (see [`SealedView`]).
pub fn sealed_view(engine: &Engine) -> &SealedView {
    &engine.shell.view
}

/// Up to `limit` events of `thread` after `after`, each opened by `engine`'s [`SealedView`].
///
/// # Errors
/// Storage errors; [`Error::Sealed`] for a body a key the view holds does not open (a wrong
/// key, damaged bytes); [`Error::Record`] for a body that does not decode once opened.
pub async fn viewed_events(
    engine: &Engine,
    thread: &ThreadId,
    after: Seq,
    limit: usize,
) -> Result<Vec<ViewedEvent>, Error> {
    let view = sealed_view(engine);
    let events = view.raw().read_since(thread, after, limit).await?;
    let mut out = Vec::with_capacity(events.len());
    for event in events {
        let body = viewed_body(engine, view, event.clone()).await?;
        out.push(ViewedEvent { event, body });
    }
    Ok(out)
}

/// The body of `event` opened by `view` (its payload read first when offloaded) and decoded.
async fn viewed_body(
    engine: &Engine,
    view: &SealedView,
    event: Event,
) -> Result<Viewed<Body>, Error> {
    let data = match offloaded(&event) {
        Some(r) => view.raw().payload(r).await?,
        None => event.data.clone(),
    };
    let data = match view.open(data)? {
        Viewed::Open(data) => data,
        Viewed::Sealed(placeholder) => return Ok(Viewed::Sealed(placeholder)),
    };
    let Recorded { mut body, thread, bookmark } =
        codec::decode_loaded(Event { data, payload: None, ..event })?;
    if let Body::CheckpointCreated { checkpoint, .. } = &mut body {
        *checkpoint = engine.store().checkpoint_covering(&thread, bookmark.seq).await?;
    }
    Ok(Viewed::Open(body))
}

/// Up to `limit` events of `thread` after `after` exactly as stored: bodies sealed (or plain
/// when written before a codec), the header in the clear. What a sealed bundle carries byte for
/// byte (`cairn bundle export` without the key); nothing here is opened or decoded.
///
/// # Errors
/// Storage errors.
pub async fn stored_events(
    engine: &Engine,
    thread: &ThreadId,
    after: Seq,
    limit: usize,
) -> Result<Vec<Event>, Error> {
    Ok(sealed_view(engine).raw().read_since(thread, after, limit).await?)
}

/// The offloaded payload `r` as stored (sealed), as [`stored_events`].
///
/// # Errors
/// Storage errors.
pub async fn stored_payload(engine: &Engine, r: &PayloadRef) -> Result<Vec<u8>, Error> {
    Ok(sealed_view(engine).raw().payload(r).await?)
}

/// Checkpoint `id` with its snapshot as stored (sealed), as [`stored_events`].
///
/// # Errors
/// Storage errors.
pub async fn stored_checkpoint(
    engine: &Engine,
    id: CheckpointId,
) -> Result<Option<Checkpoint>, Error> {
    Ok(sealed_view(engine).raw().checkpoint(id).await?)
}
