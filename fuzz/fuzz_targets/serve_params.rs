//! Arbitrary query strings to the HTTP endpoint's parameter structs (`cairn_tools::serve::query::parse`
//! of `cairn_tools::serve::params`, the
//! web view's `params_view`: the listing's search `q`, the timeline's `to` and `last`, and the
//! operations reads' `params_ops`: a bundle export's options, `max_age_ms`): never a panic; every
//! refusal is a 4xx that names a field; an accepted page size is within `SERVE_PAGE_MAX`, a
//! timeline window within `TIMELINE_EVENTS_MAX`, a search within `SEARCH_CHARS_MAX`. The query is split as a form (`&`, then the first `=`), without percent
//! decoding: the parsers see decoded text, and any text is a possible decoding.
#![no_main]

use cairn_tools::limits::SERVE_PAGE_MAX;
use cairn_tools::serve::params::{
    CheckpointsParams, EventsParams, GraphParams, HealthParams, ListParams, NoParams, RedactParams,
    Reject, StateParams, TraceParams,
};
use cairn_tools::serve::params_ops::{BundleParams, ResumableParams};
use cairn_tools::serve::params_view::{
    SEARCH_CHARS_MAX, TIMELINE_EVENTS_MAX, TimelineParams, view_threads_params,
};
use cairn_tools::serve::query::parse;

fn refused_well(r: &Reject) {
    assert!((400..500).contains(&r.status), "{r:?}");
    assert!(r.field.is_some(), "a refusal names its field: {r:?}");
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let pairs: Vec<(String, String)> = text
        .split('&')
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) => (k.to_owned(), v.to_owned()),
            None => (kv.to_owned(), String::new()),
        })
        .collect();
    match parse::<ListParams>(&pairs) {
        Ok(p) => assert!(p.limit >= 1 && p.limit <= SERVE_PAGE_MAX),
        Err(r) => refused_well(&r),
    }
    match parse::<EventsParams>(&pairs) {
        Ok(p) => assert!(p.limit >= 1 && p.limit <= SERVE_PAGE_MAX),
        Err(r) => refused_well(&r),
    }
    match parse::<StateParams>(&pairs) {
        Ok(p) => assert!(
            [p.at.is_some(), p.at_time.is_some(), p.diff.is_some()].iter().filter(|x| **x).count()
                <= 1
        ),
        Err(r) => refused_well(&r),
    }
    if let Err(r) = parse::<GraphParams>(&pairs) {
        refused_well(&r);
    }
    match parse::<CheckpointsParams>(&pairs) {
        Ok(p) => assert!(p.limit >= 1 && p.limit <= SERVE_PAGE_MAX),
        Err(r) => refused_well(&r),
    }
    if let Err(r) = parse::<HealthParams>(&pairs) {
        refused_well(&r);
    }
    if let Err(r) = parse::<TraceParams>(&pairs) {
        refused_well(&r);
    }
    if let Err(r) = parse::<NoParams>(&pairs) {
        refused_well(&r);
    }
    if let Err(r) = parse::<RedactParams>(&pairs) {
        refused_well(&r);
    }
    match view_threads_params(&pairs) {
        Ok(p) => {
            assert!(p.list.limit >= 1 && p.list.limit <= SERVE_PAGE_MAX);
            assert!(
                p.search.is_none_or(|q| !q.is_empty() && q.chars().count() <= SEARCH_CHARS_MAX * 3)
            );
        }
        Err(r) => refused_well(&r),
    }
    match parse::<TimelineParams>(&pairs) {
        Ok(p) => {
            assert!(p.last >= 1 && p.last <= TIMELINE_EVENTS_MAX);
            assert!(p.to.is_none_or(|to| to >= 1));
        }
        Err(r) => refused_well(&r),
    }
    match parse::<BundleParams>(&pairs).map(BundleParams::options) {
        Ok(o) => assert!(o.last_events.is_none_or(|n| n >= 1) && !o.gzip),
        Err(r) => refused_well(&r),
    }
    if let Err(r) = parse::<ResumableParams>(&pairs) {
        refused_well(&r);
    }
});
