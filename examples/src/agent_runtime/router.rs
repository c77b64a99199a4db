//! The intent router: patterns with a confidence each, a confidence
//! threshold, a model as the fallback classifier, and a cache of routing results with a time to
//! live, held in the application.
//!
//! The router runs inside a recorded tool call of the `understand` node, so a routing decision
//! is made once per task and read back from the log on resume and replay: a restart, an emptied
//! cache or a changed pattern table never re-routes a task that was already routed.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use cairn::dsl::Usage;
use cairn_tools::model::{LanguageModel, ModelRequest};
use serde::{Deserialize, Serialize};

/// Below this confidence the runtime asks the user instead of running a skill (seed: 0.6).
pub const CONFIDENCE_THRESHOLD: f64 = 0.6;
/// Entries the routing cache keeps (seed: 50).
pub const CACHE_ENTRIES_MAX: usize = 50;
/// How long a cached routing result stays valid, in ms of engine clock (seed: ten minutes).
pub const CACHE_TTL_MS: u64 = 10 * 60 * 1_000;

/// How a rule recognises an intent. The seed's regexes are all of two shapes, "one of these
/// words" and "one of these words, then within N characters one of those"
/// (`/(?:写|创作).{0,5}(?:文章|博客)/i`); these are those two shapes, matched case-insensitively.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pattern {
    /// Any of these words occurs.
    Any(Vec<String>),
    /// One of `first` occurs, and one of `then` starts at most `within` characters after it.
    Near {
        /// The leading words.
        first: Vec<String>,
        /// Most characters between the two.
        within: usize,
        /// The trailing words.
        then: Vec<String>,
    },
}

impl Pattern {
    /// "Any of these words".
    pub fn any(words: &[&str]) -> Self {
        Self::Any(words.iter().map(|w| w.to_lowercase()).collect())
    }

    /// "One of `first`, then within `within` characters one of `then`".
    pub fn near(first: &[&str], within: usize, then: &[&str]) -> Self {
        let lower = |ws: &[&str]| ws.iter().map(|w| w.to_lowercase()).collect();
        Self::Near { first: lower(first), within, then: lower(then) }
    }

    /// Whether `text` matches, case-insensitively.
    ///
    /// # Examples
    /// ```
    /// use cairn_examples::agent_runtime::router::Pattern;
    /// let p = Pattern::near(&["write", "写"], 12, &["article", "文章"]);
    /// assert!(p.matches("Please WRITE me an article"));
    /// assert!(p.matches("帮我写一篇文章"));
    /// assert!(!p.matches("an article I will write"));
    /// ```
    pub fn matches(&self, text: &str) -> bool {
        let hay: Vec<char> = text.to_lowercase().chars().collect();
        match self {
            Self::Any(words) => words.iter().any(|w| starts(&hay, w).next().is_some()),
            Self::Near { first, within, then } => first.iter().any(|a| {
                let a_len = a.chars().count();
                starts(&hay, a).any(|s| {
                    let end = s + a_len;
                    then.iter().any(|b| starts(&hay, b).any(|t| t >= end && t - end <= *within))
                })
            }),
        }
    }
}

/// Start positions (in chars) of `needle` in `hay`.
fn starts<'a>(hay: &'a [char], needle: &str) -> impl Iterator<Item = usize> + 'a {
    let needle: Vec<char> = needle.chars().collect();
    let n = needle.len();
    (0..hay.len().saturating_sub(n.saturating_sub(1)))
        .filter(move |&i| n > 0 && hay.get(i..i + n) == Some(&needle[..]))
}

/// One row of the routing table.
#[derive(Debug, Clone, PartialEq)]
pub struct IntentRule {
    /// The intent's name, e.g. `WRITE_ARTICLE`.
    pub intent: String,
    /// The skill that handles it.
    pub skill: String,
    /// How to recognise it.
    pub pattern: Pattern,
    /// How sure a match makes the router.
    pub confidence: f64,
}

/// A routing decision: what the router understood, and which skill (if any) runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Intent {
    /// The intent's name (`UNKNOWN` when nothing matched).
    pub intent: String,
    /// How sure the router is, 0..=1.
    pub confidence: f64,
    /// The skill to run; `None` when the confidence is below the threshold or no skill fits.
    pub skill: Option<String>,
    /// Parameters taken from the request (`topic`, `text`).
    pub params: BTreeMap<String, String>,
    /// `"pattern"` or `"model"`: what decided.
    pub source: String,
    /// Whether this came from the routing cache.
    pub cached: bool,
}

/// The routing tool's input: the request and the (recorded) time it is routed at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteRequest {
    /// What the user typed.
    pub text: String,
    /// Engine clock at routing time, read through the node context so it is recorded.
    pub now_ms: u64,
}

/// Counters of the routing cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups answered from the cache.
    pub hits: u64,
    /// Lookups not answered (expired entries included).
    pub misses: u64,
    /// Entries found past their time to live.
    pub expired: u64,
    /// Entries evicted because the cache was full.
    pub evicted: u64,
}

/// The intent router. Cheap to share (`Arc`); the cache is behind a lock.
pub struct IntentRouter {
    rules: Vec<IntentRule>,
    model: Arc<dyn LanguageModel>,
    cache: Mutex<Cache>,
}

impl std::fmt::Debug for IntentRouter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IntentRouter").field("rules", &self.rules.len()).finish()
    }
}

impl IntentRouter {
    /// A router with the runtime's table (write an article, summarise) plus a weak keyword rule,
    /// and `model` as the fallback classifier for requests no pattern matches.
    pub fn new(model: Arc<dyn LanguageModel>) -> Self {
        let rule = |intent: &str, skill: &str, pattern, confidence| IntentRule {
            intent: intent.into(),
            skill: skill.into(),
            pattern,
            confidence,
        };
        let rules = vec![
            rule(
                "WRITE_ARTICLE",
                "write_article",
                Pattern::near(
                    &["write", "draft", "compose", "写", "创作", "生成", "创建"],
                    12,
                    &["article", "blog", "post", "文章", "博客", "文档"],
                ),
                0.85,
            ),
            rule(
                "SUMMARIZE",
                "summarize",
                Pattern::any(&["summarize", "summarise", "tl;dr", "总结", "概括", "摘要"]),
                0.8,
            ),
            // A bare mention is a hint, not a request: below the threshold on purpose.
            rule("WRITE_ARTICLE", "write_article", Pattern::any(&["article", "文章"]), 0.5),
        ];
        Self { rules, model, cache: Mutex::new(Cache::default()) }
    }

    /// Routes `request`: from the cache if a live entry exists, else by the first matching
    /// rule, else by asking the model. Never fails: a model error or an unreadable answer is
    /// the `UNKNOWN` intent with confidence 0. Returns the model usage spent.
    pub async fn route(&self, request: &RouteRequest) -> (Intent, Usage) {
        let key = normalize(&request.text);
        if let Some(hit) = self.cache().get(&key, request.now_ms) {
            return (Intent { cached: true, ..hit }, Usage::default());
        }
        let (intent, usage) = match self.rules.iter().find(|r| r.pattern.matches(&key)) {
            Some(rule) => {
                (self.decide(&rule.intent, rule.confidence, &key, "pattern"), Usage::default())
            }
            None => self.ask_model(&key).await,
        };
        self.cache().put(key, intent.clone(), request.now_ms);
        (intent, usage)
    }

    /// The cache's counters.
    pub fn stats(&self) -> CacheStats {
        self.cache().stats
    }

    fn cache(&self) -> MutexGuard<'_, Cache> {
        // The cache is consistent between any two statements; a panic elsewhere cannot leave
        // it half-updated.
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The model as a classifier (the seed's LLM fallback).
    async fn ask_model(&self, text: &str) -> (Intent, Usage) {
        #[derive(Deserialize)]
        struct Answer {
            #[serde(rename = "type")]
            intent: String,
            confidence: f64,
        }
        let request = ModelRequest {
            purpose: "intent".into(),
            prompt: format!("Classify as JSON {{\"type\", \"confidence\"}}: {text}"),
        };
        match self.model.complete(request).await {
            Ok(r) => {
                let (name, confidence) = match serde_json::from_str::<Answer>(&r.text) {
                    Ok(a) => (a.intent, a.confidence.clamp(0.0, 1.0)),
                    Err(_) => ("UNKNOWN".to_owned(), 0.0),
                };
                (self.decide(&name, confidence, text, "model"), r.usage)
            }
            Err(_) => (self.decide("UNKNOWN", 0.0, text, "model"), Usage::default()),
        }
    }

    fn decide(&self, intent: &str, confidence: f64, text: &str, source: &str) -> Intent {
        let skill = if confidence >= CONFIDENCE_THRESHOLD {
            self.rules.iter().find(|r| r.intent == intent).map(|r| r.skill.clone())
        } else {
            None
        };
        Intent {
            intent: intent.to_owned(),
            confidence,
            skill,
            params: params(intent, text),
            source: source.to_owned(),
            cached: false,
        }
    }
}

/// The cache key: lower case, whitespace collapsed.
pub fn normalize(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase()
}

/// Parameters of an intent, from the normalised request.
fn params(intent: &str, text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let trim = |s: &str| {
        s.trim()
            .trim_end_matches(['.', '!', '?', '。'])
            .trim_end_matches("的文章")
            .trim()
            .to_owned()
    };
    match intent {
        "WRITE_ARTICLE" => {
            let topic = ["about ", "on ", "关于"]
                .iter()
                .find_map(|m| text.split_once(m).map(|(_, rest)| trim(rest)))
                .unwrap_or_else(|| trim(text));
            out.insert("topic".into(), topic);
        }
        "SUMMARIZE" => {
            let body = text.split_once(':').map_or(text, |(_, rest)| rest);
            out.insert("text".into(), trim(body));
        }
        _ => {}
    }
    out
}

/// An LRU map with a time to live per entry.
#[derive(Debug, Default)]
struct Cache {
    entries: HashMap<String, Entry>,
    /// Use counter: the least recently used entry has the smallest `used`.
    tick: u64,
    stats: CacheStats,
}

#[derive(Debug)]
struct Entry {
    intent: Intent,
    expires_at_ms: u64,
    used: u64,
}

impl Cache {
    fn get(&mut self, key: &str, now_ms: u64) -> Option<Intent> {
        self.tick += 1;
        let found = match self.entries.get_mut(key) {
            Some(e) if now_ms < e.expires_at_ms => {
                e.used = self.tick;
                Some(e.intent.clone())
            }
            Some(_) => {
                self.entries.remove(key);
                self.stats.expired += 1;
                None
            }
            None => None,
        };
        match found {
            Some(_) => self.stats.hits += 1,
            None => self.stats.misses += 1,
        }
        found
    }

    fn put(&mut self, key: String, intent: Intent, now_ms: u64) {
        self.tick += 1;
        if !self.entries.contains_key(&key) && self.entries.len() >= CACHE_ENTRIES_MAX {
            let oldest = self.entries.iter().min_by_key(|(_, e)| e.used).map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                self.entries.remove(&k);
                self.stats.evicted += 1;
            }
        }
        let entry =
            Entry { intent, expires_at_ms: now_ms.saturating_add(CACHE_TTL_MS), used: self.tick };
        self.entries.insert(key, entry);
    }
}

#[cfg(test)]
mod tests {
    use cairn_tools::model::ScriptedModel;

    use super::*;

    fn router() -> IntentRouter {
        let model =
            ScriptedModel::new().answers("intent", &[r#"{"type":"UNKNOWN","confidence":0.2}"#]);
        IntentRouter::new(Arc::new(model))
    }

    fn at(text: &str, now_ms: u64) -> RouteRequest {
        RouteRequest { text: text.into(), now_ms }
    }

    #[tokio::test]
    async fn patterns_threshold_and_fallback() {
        let r = router();
        let (i, _) = r.route(&at("Write an article about durable workflows", 0)).await;
        assert_eq!(
            (i.intent.as_str(), i.skill.as_deref()),
            ("WRITE_ARTICLE", Some("write_article"))
        );
        assert_eq!(i.params["topic"], "durable workflows");
        let (i, _) = r.route(&at("帮我写一篇关于持久化工作流的文章", 0)).await;
        assert_eq!(i.skill.as_deref(), Some("write_article"));
        assert_eq!(i.params["topic"], "持久化工作流");
        let (i, _) = r.route(&at("that article was long", 0)).await;
        assert_eq!((i.confidence, i.skill.as_deref()), (0.5, None), "below the threshold");
        let (i, usage) = r.route(&at("what time is it?", 0)).await;
        assert_eq!((i.intent.as_str(), i.source.as_str(), i.skill), ("UNKNOWN", "model", None));
        assert!(usage.tokens > 0, "the model's classification costs tokens");
    }

    #[tokio::test]
    async fn cache_hits_expires_and_evicts() {
        let r = router();
        let (a, _) = r.route(&at("Summarize: the log", 1_000)).await;
        let (b, _) = r.route(&at("  summarize:   THE log ", 1_000 + CACHE_TTL_MS - 1)).await;
        assert!(!a.cached && b.cached);
        assert_eq!(Intent { cached: false, ..b }, a);
        let (c, _) = r.route(&at("summarize: the log", 1_000 + CACHE_TTL_MS)).await;
        assert!(!c.cached, "expired at exactly the time to live");
        assert_eq!(r.stats(), CacheStats { hits: 1, misses: 2, expired: 1, evicted: 0 });
        for n in 0..CACHE_ENTRIES_MAX {
            r.route(&at(&format!("summarize: item {n}"), 2_000)).await;
        }
        assert_eq!(r.stats().evicted, 1, "the oldest entry made room");
        let (d, _) = r.route(&at("summarize: item 49", 2_000)).await;
        assert!(d.cached, "recent entries stay");
    }

    #[test]
    fn near_respects_order_and_distance() {
        let p = Pattern::near(&["写"], 5, &["文章"]);
        assert!(p.matches("写一篇文章"));
        assert!(!p.matches("写一篇很长很长很长的文章"), "more than five characters apart");
        assert!(!p.matches("文章写"));
        assert!(!Pattern::any(&[]).matches("anything"));
    }
}
