//! The request parameters of the web view's own reads (`super::view`): the threads listing's
//! search `q` and the timeline's window (`to`, `last`). Pure functions of decoded query pairs,
//! as in [`super::params`] (the fuzz target `serve_params` drives them too); every refusal names
//! its field.

use serde::Deserialize;
use utoipa::IntoParams;

use super::params::{ListParams, Reject};
use super::query::{Check, from_pairs, parse};

/// The most events a timeline folds in one window.
pub const TIMELINE_EVENTS_MAX: u64 = 5_000;

/// The longest search text (`q`), in characters.
pub const SEARCH_CHARS_MAX: usize = 200;

/// `GET /api/view/threads`: the listing's filters and page, and the search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewThreadsParams {
    /// Filters and page, as `GET /api/threads` takes them.
    pub list: ListParams,
    /// Text to find in a thread's id, workflow or labels, lower case (`None`: no search).
    pub search: Option<String>,
}

/// The search of `GET /api/view/threads` (the rest is [`ListParams`]).
#[derive(Debug, Clone, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SearchParam {
    /// Text to find in a thread's id, workflow or labels (at most [`SEARCH_CHARS_MAX`]
    /// characters).
    pub q: Option<String>,
}

/// `GET /api/threads/{id}/timeline`: a window of the thread's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct TimelineParams {
    /// The window's last seq, at least 1 (the thread's last when not given; a seq past it is
    /// the last).
    pub to: Option<u64>,
    /// Events in the window (1..=[`TIMELINE_EVENTS_MAX`], default the maximum).
    #[serde(default = "timeline_max")]
    pub last: u64,
}

fn timeline_max() -> u64 {
    TIMELINE_EVENTS_MAX
}

/// Parses the query of `GET /api/view/threads`: `q` at most once and at most
/// [`SEARCH_CHARS_MAX`] characters, the rest as [`ListParams`].
///
/// # Errors
/// A 400 naming the parameter.
///
/// # Examples
/// ```
/// use cairn_tools::serve::params_view::view_threads_params;
/// let pairs = vec![("q".to_owned(), "a".to_owned()), ("q".to_owned(), "b".to_owned())];
/// assert_eq!(view_threads_params(&pairs).unwrap_err().field.as_deref(), Some("q"));
/// ```
pub fn view_threads_params(pairs: &[(String, String)]) -> Result<ViewThreadsParams, Reject> {
    let (search, rest): (Vec<_>, Vec<_>) = pairs.iter().cloned().partition(|(k, _)| k == "q");
    let search = from_pairs::<SearchParam>(&search)?.q;
    if search.as_ref().is_some_and(|q| q.chars().count() > SEARCH_CHARS_MAX) {
        return Err(Reject::bad("q", format!("longer than {SEARCH_CHARS_MAX} characters")));
    }
    let search = search.map(|q| q.to_lowercase()).filter(|q| !q.is_empty());
    Ok(ViewThreadsParams { list: parse(&rest)?, search })
}

/// `to` is a seq (at least 1), `last` within 1..=[`TIMELINE_EVENTS_MAX`].
impl Check for TimelineParams {
    fn check(&self) -> Result<(), Reject> {
        if self.to == Some(0) {
            return Err(Reject::bad("to", "a seq is at least 1"));
        }
        if !(1..=TIMELINE_EVENTS_MAX).contains(&self.last) {
            let error = format!("{} is not in 1..={TIMELINE_EVENTS_MAX}", self.last);
            return Err(Reject::bad("last", error));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::query::q;

    #[test]
    fn the_views_parameters_are_read_or_refused_naming_their_field() {
        let p = view_threads_params(&q(&[("q", "ASK"), ("limit", "5")])).unwrap();
        assert_eq!((p.search.as_deref(), p.list.limit), (Some("ask"), 5));
        assert_eq!(view_threads_params(&q(&[("q", "")])).unwrap().search, None);
        let long = "é".repeat(SEARCH_CHARS_MAX + 1);
        assert_eq!(
            view_threads_params(&q(&[("q", &long)])).unwrap_err().field.as_deref(),
            Some("q")
        );
        assert_eq!(
            view_threads_params(&q(&[("q", "x"), ("limit", "0")])).unwrap_err().field.as_deref(),
            Some("limit")
        );
        let t = parse::<TimelineParams>(&q(&[("to", "900"), ("last", "100")])).unwrap();
        assert_eq!((t.to, t.last), (Some(900), 100));
        assert_eq!(
            parse::<TimelineParams>(&q(&[])).unwrap(),
            TimelineParams { to: None, last: TIMELINE_EVENTS_MAX }
        );
        let field = |pairs: &[(&str, &str)]| parse::<TimelineParams>(&q(pairs)).unwrap_err().field;
        assert_eq!(field(&[("to", "0")]).as_deref(), Some("to"));
        assert_eq!(field(&[("to", "x")]).as_deref(), Some("to"));
        assert_eq!(field(&[("last", "5001")]).as_deref(), Some("last"));
        assert_eq!(field(&[("last", "1"), ("last", "2")]).as_deref(), Some("last"));
        assert_eq!(field(&[("colour", "red")]).as_deref(), Some("colour"));
    }
}
