//! The web view: HTML pages served by the endpoint, with their script and style compiled into
//! the binary (`include_str!` of `serve/ui/`), so they work with no network: nothing is fetched
//! but from this endpoint. Pages:
//!
//! | path | page |
//! |---|---|
//! | `/` | redirects to `/ui/threads` |
//! | `/ui/threads` | threads: status, workflow, progress, labels, age; filters, search, live counts, paging |
//! | `/ui/threads/{id}` | a thread: graph, timeline, live event log (windowed), state and diff at a step, checkpoints, budgets, last error, controls, forms that send a signal (`POST /api/threads/{id}/signal`), apply an update (`POST /api/threads/{id}/updates/{name}`) and complete a promise (`POST /api/promises/{id}`), its published events and promises, a link to its live stream |
//! | `/ui/messages/{correlation_id}` | the messages of a correlation id as a sequence picture |
//! | `/ui/queues` | queues: limits, running and waiting threads in all and per key, rate window use; live, with each queue's depth drawn over its last samples |
//! | `/ui/workflows` | workflows: each compiled-in version's graph side by side, threads by status and version, and a form that starts a thread (`POST /api/workflows/{id}/threads`), or with an update named starts it if absent and applies the update (`POST /api/threads/{id}/updates/{name}` with `start`) |
//! | `/ui/schedules` | schedules: spec, status, next ticks, last runs; pause, resume, trigger, delete |
//! | `/ui/threads/{id}/stream` | a thread's live stream (`GET /api/threads/{id}/stream`): chunks as they come, each node's result, the end; with `?signal=NAME`, Approve and Reject send that signal `true` or `false` |
//!
//! The pages read the JSON API (and [`super::view`]'s routes) from the browser. No page carries
//! the control token: the pages with controls (thread, workflows, schedules) ask for it (kept in the tab's `sessionStorage`), or takes
//! it once from the address's fragment (`#token=...`, which a browser never sends to the server)
//! and removes it from the address. The pages' reads send the tab's token when it has one (a
//! public endpoint's reads need it; the pages and assets themselves do not, they hold no data);
//! the live log, an `EventSource`, cannot send it. Every page is served with a content security policy that
//! allows scripts, styles, images and connections from this endpoint only.

use axum::extract::Path;
use axum::http::header;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{delete, post};

use super::params::Reject;
use super::routes::Table;
use super::{catalog, view};

/// The compiled-in files of the web view: (name under `/ui/assets/`, content type, text).
const ASSETS: &[(&str, &str, &str)] = &[
    ("app.css", "text/css; charset=utf-8", include_str!("ui/app.css")),
    ("common.js", "text/javascript; charset=utf-8", include_str!("ui/common.js")),
    ("threads.js", "text/javascript; charset=utf-8", include_str!("ui/threads.js")),
    ("thread.js", "text/javascript; charset=utf-8", include_str!("ui/thread.js")),
    ("messages.js", "text/javascript; charset=utf-8", include_str!("ui/messages.js")),
    ("queues.js", "text/javascript; charset=utf-8", include_str!("ui/queues.js")),
    ("workflows.js", "text/javascript; charset=utf-8", include_str!("ui/workflows.js")),
    ("start.js", "text/javascript; charset=utf-8", include_str!("ui/start.js")),
    ("send.js", "text/javascript; charset=utf-8", include_str!("ui/send.js")),
    ("schedules.js", "text/javascript; charset=utf-8", include_str!("ui/schedules.js")),
    ("stream.js", "text/javascript; charset=utf-8", include_str!("ui/stream.js")),
    ("batch.js", "text/javascript; charset=utf-8", include_str!("ui/batch.js")),
];

/// A page of the web view: its name (`data-page`, and the script `{name}.js` it runs), title, the
/// scripts it runs before its own, and its `<main>` (`serve/ui/{name}.html`). Every page is
/// served in one frame (`serve/ui/frame.html`: head, style, header and navigation).
struct Page {
    name: &'static str,
    title: &'static str,
    before: &'static [&'static str],
    main: &'static str,
}

const THREADS: Page = page_of("threads", "Threads", &["batch"], include_str!("ui/threads.html"));
const THREAD: Page = page_of("thread", "Thread", &["send"], include_str!("ui/thread.html"));
const MESSAGES: Page = page_of("messages", "Messages", &[], include_str!("ui/messages.html"));
const QUEUES: Page = page_of("queues", "Queues", &[], include_str!("ui/queues.html"));
const WORKFLOWS: Page =
    page_of("workflows", "Workflows", &["start"], include_str!("ui/workflows.html"));
const SCHEDULES: Page = page_of("schedules", "Schedules", &[], include_str!("ui/schedules.html"));
const STREAM: Page = page_of("stream", "Live stream", &[], include_str!("ui/stream.html"));

const fn page_of(
    name: &'static str,
    title: &'static str,
    before: &'static [&'static str],
    main: &'static str,
) -> Page {
    Page { name, title, before, main }
}

/// The navigation, in order: (page name, label); a page's path is `/ui/{name}`.
const NAV: &[(&str, &str)] = &[
    ("threads", "Threads"),
    ("messages", "Messages"),
    ("queues", "Queues"),
    ("workflows", "Workflows"),
    ("schedules", "Schedules"),
];

const FRAME: &str = include_str!("ui/frame.html");

/// The parts more than one page's `<main>` holds, by the placeholder that stands for each.
const PARTS: &[(&str, &str)] = &[
    ("{token_bar}", include_str!("ui/token-bar.html")),
    ("{edge_legend}", include_str!("ui/edge-legend.html")),
];

impl Page {
    /// The whole document: the frame with this page's title, scripts, navigation and `<main>`.
    fn html(&self) -> String {
        let scripts: String = self
            .before
            .iter()
            .chain(std::iter::once(&self.name))
            .map(|s| format!("<script src=\"/ui/assets/{s}.js\" defer></script>\n"))
            .collect();
        let nav: String = NAV
            .iter()
            .map(|(name, label)| {
                let active = if *name == self.name { " class=\"active\"" } else { "" };
                format!("<a href=\"/ui/{name}\"{active}>{label}</a>")
            })
            .collect();
        FRAME
            .replace("{title}", self.title)
            .replace("{scripts}", &scripts)
            .replace("{page}", self.name)
            .replace("{nav}", &nav)
            .replace(
                "{main}",
                &PARTS
                    .iter()
                    .fold(self.main.to_owned(), |main, (at, part)| main.replace(at, part.trim())),
            )
    }
}

/// Scripts, styles, images and requests from this endpoint only; no inline script. Inline
/// styles are allowed for the SVG pictures' own `<style>` and the bars' widths.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
                   img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; \
                   frame-ancestors 'none'";

/// `table` with the web view's routes (pages, assets, the reads they need, and the schedule
/// controls of the schedules page).
pub(super) fn routes(table: Table) -> Table {
    table
        .get("/", || async { Redirect::to("/ui/threads") })
        .get("/ui", || async { Redirect::to("/ui/threads") })
        .get("/ui/threads", || async { page(&THREADS) })
        .get("/ui/threads/{id}", |_: Path<String>| async { page(&THREAD) })
        .get("/ui/threads/{id}/stream", |_: Path<String>| async { page(&STREAM) })
        .get("/ui/messages", || async { page(&MESSAGES) })
        .get("/ui/messages/{id}", |_: Path<String>| async { page(&MESSAGES) })
        .get("/ui/queues", || async { page(&QUEUES) })
        .get("/ui/workflows", || async { page(&WORKFLOWS) })
        .get("/ui/schedules", || async { page(&SCHEDULES) })
        .get("/ui/assets/{file}", asset)
        .get("/api/view/threads", view::threads)
        .get("/api/threads/{id}/graph.svg", view::graph_svg)
        .get("/api/threads/{id}/timeline", view::timeline)
        .get("/api/trace/{id}/sequence.svg", view::sequence_svg)
        .get("/api/view/workflows", catalog::workflows)
        .get("/api/workflows/{id}/graph.svg", catalog::workflow_graph_svg)
        .get("/api/schedules", catalog::schedules)
        // `{id}` is the schedule's name (named as the other routes' segment).
        .at("POST", "/api/schedules/{id}/backfill", post(catalog::backfill))
        .at("POST", "/api/schedules/{id}/{control}", post(catalog::control))
        .at("DELETE", "/api/schedules/{id}", delete(catalog::delete))
}

fn page(page: &Page) -> Response {
    let headers = [
        (header::CONTENT_TYPE, "text/html; charset=utf-8"),
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::CACHE_CONTROL, "no-cache"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
    ];
    (headers, page.html()).into_response()
}

async fn asset(Path(file): Path<String>) -> Result<Response, Reject> {
    let Some((_, kind, text)) = ASSETS.iter().find(|(name, _, _)| *name == file) else {
        return Err(Reject::not_found("path", format!("no asset {file:?}")));
    };
    let headers = [
        (header::CONTENT_TYPE, *kind),
        (header::CACHE_CONTROL, "no-cache"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
    ];
    Ok((headers, *text).into_response())
}

#[cfg(test)]
mod tests {
    use super::{MESSAGES, NAV, Page, QUEUES, SCHEDULES, STREAM, THREAD, THREADS, WORKFLOWS};

    /// Every page is a whole document: its title, its scripts (its own last), its navigation
    /// entry marked (the thread page has none), its `<main>`, and no placeholder left.
    #[test]
    fn every_page_is_framed_whole() {
        for page in [&THREADS, &THREAD, &MESSAGES, &QUEUES, &WORKFLOWS, &SCHEDULES, &STREAM] {
            let html = page.html();
            let Page { name, title, main, .. } = page;
            assert!(html.starts_with("<!doctype html>") && html.ends_with("</html>\n"), "{name}");
            assert!(html.contains(&format!("<title>{title} · Cairn</title>")), "{name}");
            assert!(html.contains(&format!("<body data-page=\"{name}\">")), "{name}");
            let own = format!("/ui/assets/{name}.js");
            assert!(html.rfind("<script").is_some_and(|i| html[i..].contains(&own)), "{name}");
            let active = html.matches("class=\"active\"").count();
            let listed = NAV.iter().any(|(n, _)| n == name);
            assert_eq!(active, usize::from(listed), "{name}");
            let first = main.lines().nth(1).unwrap_or_default();
            assert!(html.contains(first), "{name}");
            for placeholder in ["{title}", "{main}", "{token_bar}", "{edge_legend}"] {
                assert!(!html.contains(placeholder), "{name}: {placeholder}");
            }
        }
        assert!(WORKFLOWS.html().contains("/ui/assets/start.js"));
        for page in [&WORKFLOWS, &SCHEDULES, &STREAM] {
            assert!(page.html().contains("<input id=\"token\""), "{}", page.name);
        }
        for page in [&WORKFLOWS, &THREAD] {
            assert!(page.html().contains("id=\"edge-legend\""), "{}", page.name);
        }
    }
}
