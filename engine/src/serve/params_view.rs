//! The request parameters of the web view's own reads (`super::view`): the threads listing's
//! search `q` and the timeline's window (`to`, `last`). Pure functions of decoded query pairs,
//! as in [`super::params`] (the fuzz target `serve_params` drives them too); every refusal names
//! its field.

use super::params::{ListParams, Reject, list_params, number, unique};

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

/// `GET /api/threads/{id}/timeline`: a window of the thread's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimelineParams {
    /// The window's last seq (the thread's last when `None`; a seq past it is the last).
    pub to: Option<u64>,
    /// Events in the window (1..=[`TIMELINE_EVENTS_MAX`], default the maximum).
    pub last: u64,
}

/// Parses the query of `GET /api/view/threads`: `q` at most once and at most
/// [`SEARCH_CHARS_MAX`] characters, the rest as [`list_params`].
///
/// # Errors
/// A 400 naming the parameter.
///
/// # Examples
/// ```
/// use cairn::serve::params_view::view_threads_params;
/// let pairs = vec![("q".to_owned(), "a".to_owned()), ("q".to_owned(), "b".to_owned())];
/// assert_eq!(view_threads_params(&pairs).unwrap_err().field.as_deref(), Some("q"));
/// ```
pub fn view_threads_params(pairs: &[(String, String)]) -> Result<ViewThreadsParams, Reject> {
    let mut search: Option<String> = None;
    let mut rest = Vec::with_capacity(pairs.len());
    for (k, v) in pairs {
        if k == "q" {
            if search.is_some() {
                return Err(Reject::bad("q", "given more than once"));
            }
            if v.chars().count() > SEARCH_CHARS_MAX {
                return Err(Reject::bad("q", format!("longer than {SEARCH_CHARS_MAX} characters")));
            }
            search = Some(v.to_lowercase());
        } else {
            rest.push((k.clone(), v.clone()));
        }
    }
    Ok(ViewThreadsParams { list: list_params(&rest)?, search: search.filter(|q| !q.is_empty()) })
}

/// Parses the query of `GET /api/threads/{id}/timeline`: `to` (a seq, at least 1) and `last`
/// (1..=[`TIMELINE_EVENTS_MAX`]), each at most once.
///
/// # Errors
/// A 400 naming the parameter.
///
/// # Examples
/// ```
/// use cairn::serve::params_view::timeline_params;
/// let pairs = vec![("last".to_owned(), "0".to_owned())];
/// assert_eq!(timeline_params(&pairs).unwrap_err().field.as_deref(), Some("last"));
/// ```
pub fn timeline_params(pairs: &[(String, String)]) -> Result<TimelineParams, Reject> {
    let mut p = TimelineParams { to: None, last: TIMELINE_EVENTS_MAX };
    for (key, value) in unique(pairs, &["to", "last"])? {
        if key == "to" {
            let to: u64 = number("to", value)?;
            if to == 0 {
                return Err(Reject::bad("to", "a seq is at least 1"));
            }
            p.to = Some(to);
        } else {
            p.last = value
                .parse::<u64>()
                .ok()
                .filter(|n| (1..=TIMELINE_EVENTS_MAX).contains(n))
                .ok_or_else(|| {
                    Reject::bad("last", format!("{value:?} is not in 1..={TIMELINE_EVENTS_MAX}"))
                })?;
        }
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

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
        let t = timeline_params(&q(&[("to", "900"), ("last", "100")])).unwrap();
        assert_eq!((t.to, t.last), (Some(900), 100));
        assert_eq!(
            timeline_params(&q(&[])).unwrap(),
            TimelineParams { to: None, last: TIMELINE_EVENTS_MAX }
        );
        let field = |pairs: &[(&str, &str)]| timeline_params(&q(pairs)).unwrap_err().field;
        assert_eq!(field(&[("to", "0")]).as_deref(), Some("to"));
        assert_eq!(field(&[("to", "x")]).as_deref(), Some("to"));
        assert_eq!(field(&[("last", "5001")]).as_deref(), Some("last"));
        assert_eq!(field(&[("last", "1"), ("last", "2")]).as_deref(), Some("last"));
        assert_eq!(field(&[("colour", "red")]).as_deref(), Some("colour"));
    }
}
