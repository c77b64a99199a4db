//! `GET /api/openapi.json`: the endpoint's OpenAPI 3.1 document, built from the route table (so
//! it lists every route the router has) and from the handlers' own types: the query parameters
//! are the derived [`IntoParams`] structs of `params`, the bodies the `ToSchema` structs the
//! controls and the start read, errors the [`Refusal`] every refusal is answered with.

use axum::Json;
use axum::extract::State;
use utoipa::openapi::path::{HttpMethod, Operation, OperationBuilder, Parameter, ParameterIn};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{
    ComponentsBuilder, ContentBuilder, InfoBuilder, OpenApi, OpenApiBuilder, PathItem,
    PathsBuilder, Ref, RefOr, Required, ResponseBuilder,
};
use utoipa::{IntoParams, PartialSchema, ToSchema};

use super::app::App;
use super::params::{
    CheckpointsParams, EventsParams, ForceParams, GraphFormat, GraphParams, HealthParams,
    ListParams, RedactParams, StateParams, StreamParams, TraceParams, VersionParams, WaitParams,
};
use super::params_ops::{BundleParams, ResumableParams};
use super::params_view::{SearchParam, TimelineParams};
use super::wire::{BatchAnswer, Controlled, Emitted, Refusal, Started, ThreadResult, UpdateAnswer};
use super::{
    Route, batches, catalog, checkpoint_requests, controls, events, promises, start, updates,
};
use crate::debug::rows::{StateRow, ThreadDetails, ThreadsPage, VerifyRow};

/// The security scheme's name in the document: the bearer token (`<db>.token`).
const TOKEN: &str = "token";

/// What the document says of one route beyond its method and path.
#[derive(Default)]
pub(super) struct Doc {
    /// One line.
    summary: &'static str,
    /// Path and query parameters.
    params: Vec<Parameter>,
    /// The JSON body, for controls that take one.
    body: Option<RefOr<Schema>>,
    /// The answer's media type (`application/json` when `None`).
    media: Option<&'static str>,
    /// The answer's type, a component (an object when `None`).
    answer: Option<String>,
    /// The answer's component and the components it names.
    schemas: Vec<(String, RefOr<Schema>)>,
}

impl Doc {
    fn new(summary: &'static str) -> Self {
        Self { summary, ..Self::default() }
    }

    fn query<P: IntoParams>(mut self) -> Self {
        self.params.extend(P::into_params(|| Some(ParameterIn::Query)));
        self
    }

    fn body(mut self, schema: RefOr<Schema>) -> Self {
        self.body = Some(schema);
        self
    }

    fn answers<T: ToSchema>(mut self) -> Self {
        self.schemas.push((T::name().into_owned(), T::schema()));
        T::schemas(&mut self.schemas);
        self.answer = Some(T::name().into_owned());
        self
    }

    fn media(mut self, media: &'static str) -> Self {
        self.media = Some(media);
        self
    }
}

/// The document for `route`, or `None` for a route this module does not know (a test fails on
/// one: every route is documented here).
pub(super) fn doc(route: &Route) -> Option<Doc> {
    let text = "text/plain";
    Some(match (route.method, route.path) {
        ("GET", "/metrics") => Doc::new("Prometheus text").media(text),
        ("GET", "/api/openapi.json") => Doc::new("This document"),
        ("GET", "/api/health") => Doc::new("The health report").query::<HealthParams>(),
        ("GET", "/api/versions") => Doc::new("Per workflow version and per worker build, its unfinished threads"),
        ("GET", "/api/verify") => Doc::new("Every record checked").answers::<VerifyRow>(),
        ("GET", "/api/metrics") => Doc::new("Prometheus text or the health report").media(text),
        ("GET", "/api/threads") => {
            Doc::new("A page of threads").query::<ListParams>().answers::<ThreadsPage>()
        }
        ("GET", "/api/threads/{id}") => {
            Doc::new("One thread").query::<RedactParams>().answers::<ThreadDetails>()
        }
        ("DELETE", "/api/threads/{id}") => Doc::new("Deletes a thread").query::<ForceParams>(),
        ("GET", "/api/threads/{id}/result") => Doc::new("The thread's result (a long poll)")
            .query::<WaitParams>()
            .answers::<ThreadResult>(),
        ("GET", "/api/threads/{id}/events") => {
            Doc::new("Events after a seq; `follow=1`: Server-Sent Events").query::<EventsParams>()
        }
        ("GET", "/api/threads/{id}/stream") => {
            Doc::new("The thread's live stream as Server-Sent Events (chunk, gap, closed, ended)")
                .query::<StreamParams>()
                .media("text/event-stream")
        }
        ("GET", "/api/threads/{id}/state") => {
            Doc::new(
                "State after a seq or at a time (`diff`: {thread, from, to, changes}; \
                 `session`: {thread, at_time, threads})",
            )
                .query::<StateParams>()
                .answers::<StateRow>()
        }
        ("GET", "/api/threads/{id}/checkpoints") => {
            Doc::new("The thread's checkpoints").query::<RedactParams>()
        }
        ("GET", "/api/threads/{id}/bundle") => {
            Doc::new("The thread's debug bundle").query::<BundleParams>()
        }
        ("GET", "/api/threads/{id}/replay") => {
            Doc::new("The thread replayed against the engine's code")
        }
        ("GET", "/api/resumable") => {
            Doc::new("Threads the engine could resume").query::<ResumableParams>()
        }
        ("GET", "/api/workflows/{id}/graph") => {
            Doc::new("A workflow's graph (dot or mermaid)").query::<GraphParams>().media(text)
        }
        ("GET", "/api/trace/{id}") => Doc::new("Messages carrying a correlation id"),
        ("GET", "/api/trace") => {
            Doc::new("Messages as `cairn trace` finds them (`states`: {chain, steps})")
                .query::<TraceParams>()
        }
        ("GET", "/api/queues") => Doc::new("Every queue"),
        ("GET", "/api/checkpoints") => {
            Doc::new("A page of checkpoints").query::<CheckpointsParams>()
        }
        ("GET", "/api/checkpoints/{id}") => Doc::new("One checkpoint").query::<RedactParams>(),
        ("POST", "/api/threads/{id}/{control}") => {
            Doc::new("pause, resume, cancel, input, signal, fork, repin or reset").body(controls::body_schema())
        }
        ("POST", "/api/threads/{id}/updates/{name}") => Doc::new(
            "Applies an update; answers its reply once durable (504: not yet, resend the id)",
        )
        .query::<WaitParams>()
        .body(updates::UpdateBody::schema())
        .answers::<UpdateAnswer>(),
        ("POST", "/api/workflows/{id}/threads") => Doc::new(
            "Starts a thread (201; 200 existing; 429 with Retry-After over a queue rate that drops)",
        )
            .query::<WaitParams>()
            .body(start::StartBody::schema())
            .answers::<Started>(),
        _ => return view_doc(route),
    })
}

/// The document of a route of the web view and of the schedules, as [`doc`].
fn view_doc(route: &Route) -> Option<Doc> {
    let svg = "image/svg+xml";
    let html = "text/html";
    Some(match (route.method, route.path) {
        ("GET", "/" | "/ui") => Doc::new("Redirects to the web view").media(html),
        ("GET", path) if path.starts_with("/ui/") => Doc::new("A web view page").media(html),
        ("GET", "/api/view/threads") => {
            Doc::new("The web view's threads listing").query::<ListParams>().query::<SearchParam>()
        }
        ("GET", "/api/threads/{id}/graph.svg") => Doc::new("The thread's graph").media(svg),
        ("GET", "/api/threads/{id}/timeline") => {
            Doc::new("A window of the thread's log").query::<TimelineParams>()
        }
        ("GET", "/api/trace/{id}/sequence.svg") => {
            Doc::new("A sequence picture of the messages").media(svg)
        }
        ("GET", "/api/view/workflows") => Doc::new("Every workflow compiled in"),
        ("GET", "/api/workflows/{id}/graph.svg") => {
            Doc::new("A workflow's graph").query::<VersionParams>().media(svg)
        }
        ("GET", "/api/schedules") => Doc::new("Every schedule"),
        ("POST", "/api/schedules/{id}/backfill") => {
            Doc::new("One run per tick of a range, each once").body(catalog::BackfillBody::schema())
        }
        ("POST", "/api/schedules/{id}/{control}") => Doc::new("pause, resume or trigger"),
        ("DELETE", "/api/schedules/{id}") => Doc::new("Deletes a schedule"),
        _ => return promise_doc(route),
    })
}

/// The documents of the published events' and promises' routes (`promises`).
fn promise_doc(route: &Route) -> Option<Doc> {
    Some(match (route.method, route.path) {
        ("GET", "/api/threads/{id}/published") => {
            Doc::new("Every key the thread published, with its latest value")
        }
        ("GET", "/api/threads/{id}/published/{key}") => {
            Doc::new("One published key: set, pending or never_set (a long poll)")
                .query::<WaitParams>()
        }
        ("GET", "/api/threads/{id}/promises") => {
            Doc::new("Every promise the thread created: open, or completed with its value or error")
        }
        ("POST", "/api/promises/{id}") => {
            Doc::new("Completes a promise with a value or an error (409: completed otherwise)")
                .body(promises::CompleteBody::schema())
        }
        _ => return job_doc(route),
    })
}

/// The documents of the routes that start or change many threads: emitted events (`events`)
/// and batches (`batches`).
fn job_doc(route: &Route) -> Option<Doc> {
    Some(match (route.method, route.path) {
        ("POST", "/api/events") => {
            Doc::new("Emits an event: starts each subscribed workflow once per event id")
                .body(events::EmitBody::schema())
                .answers::<Emitted>()
        }
        ("POST", "/api/batches") => Doc::new(
            "Applies an operation to every thread a filter matches, as a durable job (201; 200 \
             existing id or dry run)",
        )
        .body(batches::BatchBody::schema())
        .answers::<BatchAnswer>(),
        ("GET", "/api/batches/{id}") => {
            Doc::new("A batch's progress (done of total)").answers::<BatchAnswer>()
        }
        _ => return checkpoint_doc(route),
    })
}

/// The documents of the checkpoints asked for at run time (`checkpoint_requests`).
fn checkpoint_doc(route: &Route) -> Option<Doc> {
    Some(match (route.method, route.path) {
        ("POST", "/api/threads/{id}/checkpoints/periodic") => {
            Doc::new("Asks for a periodic checkpoint of the thread (replaces an earlier one)")
                .body(checkpoint_requests::PeriodicBody::schema())
                .answers::<Controlled>()
        }
        ("DELETE", "/api/threads/{id}/checkpoints/periodic") => {
            Doc::new("Cancels the thread's periodic checkpoint request").answers::<Controlled>()
        }
        ("POST", "/api/threads/{id}/checkpoints/at-node") => {
            Doc::new("Asks for a checkpoint the next time the thread completes a node")
                .body(checkpoint_requests::AtNodeBody::schema())
                .answers::<Controlled>()
        }
        _ => return None,
    })
}

/// The document of `routes` (the endpoint's route table).
pub(super) fn document(routes: &[Route]) -> OpenApi {
    let (mut paths, mut schemas) = (PathsBuilder::new(), Vec::new());
    for route in routes {
        let mut doc = doc(route).unwrap_or_else(|| Doc::new("Undocumented"));
        schemas.append(&mut doc.schemas);
        paths = paths.path(route.path, PathItem::new(method(route.method), operation(route, doc)));
    }
    let bearer = SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer));
    let components = ComponentsBuilder::new()
        .security_scheme(TOKEN, bearer)
        .schema_from::<Refusal>()
        .schema_from::<GraphFormat>()
        .schemas_from_iter(schemas);
    OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title("Cairn endpoint")
                .version(env!("CARGO_PKG_VERSION"))
                .description(Some("The local HTTP endpoint of a Cairn engine (`cairn serve`)."))
                .build(),
        )
        .paths(paths.build())
        .components(Some(components.build()))
        .build()
}

/// `GET /api/openapi.json`.
pub(super) async fn openapi(State(_): State<App>) -> Json<OpenApi> {
    Json(document(&super::route_table()))
}

fn method(name: &str) -> HttpMethod {
    match name {
        "POST" => HttpMethod::Post,
        "DELETE" => HttpMethod::Delete,
        _ => HttpMethod::Get,
    }
}

fn operation(route: &Route, doc: Doc) -> Operation {
    let segments = route.path.split('/').filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'));
    let path_params = segments.map(|name| {
        Parameter::builder()
            .name(name)
            .parameter_in(ParameterIn::Path)
            .required(Required::True)
            .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
            .build()
    });
    let media = doc.media.unwrap_or("application/json");
    let content = match doc.answer {
        Some(name) => ContentBuilder::new().schema(Some(Ref::from_schema_name(name))),
        None => ContentBuilder::new(),
    };
    let answer =
        ResponseBuilder::new().description("The answer").content(media, content.build()).build();
    let refused = ResponseBuilder::new()
        .description("Refused: the field at fault is named")
        .content(
            "application/json",
            ContentBuilder::new().schema(Some(Ref::from_schema_name(Refusal::name()))).build(),
        )
        .build();
    let mut op = OperationBuilder::new()
        .summary(Some(doc.summary))
        .operation_id(Some(format!("{} {}", route.method, route.path)))
        .parameters(Some(path_params.chain(doc.params)))
        .response("200", answer)
        .response("4XX", refused);
    if let Some(body) = doc.body {
        let content = ContentBuilder::new().schema(Some(body)).build();
        let body = RequestBodyBuilder::new().content("application/json", content).build();
        op = op.request_body(Some(body));
    }
    if route.method != "GET" {
        op = op.security(SecurityRequirement::new(TOKEN, Vec::<String>::new()));
    }
    op.build()
}

#[cfg(test)]
mod tests {
    /// Every route the router has is documented here (none falls to "Undocumented").
    #[test]
    fn every_route_is_documented() {
        for route in super::super::route_table() {
            assert!(super::doc(&route).is_some(), "{} {} has no entry", route.method, route.path);
        }
    }
}
