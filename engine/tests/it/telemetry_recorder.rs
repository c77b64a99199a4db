//! A small `metrics` recorder for tests: what each counter, gauge and histogram holds, by name
//! and labels, so a test can check that a run moved them by the right amounts.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use metrics::{
    Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString, Unit,
};

/// One histogram's samples.
#[derive(Default)]
pub struct Samples(Mutex<Vec<f64>>);

impl HistogramFn for Samples {
    fn record(&self, value: f64) {
        self.0.lock().unwrap().push(value);
    }
}

/// Every metric registered, by `name{label=value,..}`.
#[derive(Default)]
pub struct TestRecorder {
    counters: Mutex<BTreeMap<String, Arc<AtomicU64>>>,
    gauges: Mutex<BTreeMap<String, Arc<AtomicU64>>>,
    histograms: Mutex<BTreeMap<String, Arc<Samples>>>,
    units: Mutex<BTreeMap<String, Option<Unit>>>,
}

fn id(key: &Key) -> String {
    let labels: Vec<String> = key.labels().map(|l| format!("{}={}", l.key(), l.value())).collect();
    if labels.is_empty() {
        key.name().to_owned()
    } else {
        format!("{}{{{}}}", key.name(), labels.join(","))
    }
}

impl TestRecorder {
    /// A counter's value (0 if it was never registered).
    pub fn counter(&self, id: &str) -> u64 {
        self.counters.lock().unwrap().get(id).map_or(0, |c| c.load(Ordering::SeqCst))
    }

    /// A gauge's value.
    pub fn gauge(&self, id: &str) -> f64 {
        self.gauges
            .lock()
            .unwrap()
            .get(id)
            .map_or(0.0, |g| f64::from_bits(g.load(Ordering::SeqCst)))
    }

    /// A histogram's samples.
    pub fn samples(&self, id: &str) -> Vec<f64> {
        self.histograms
            .lock()
            .unwrap()
            .get(id)
            .map(|h| h.0.lock().unwrap().clone())
            .unwrap_or_default()
    }

    /// The unit a metric was described with.
    pub fn unit(&self, name: &str) -> Option<Unit> {
        self.units.lock().unwrap().get(name).copied().flatten()
    }

    /// Every metric name registered.
    pub fn names(&self) -> std::collections::BTreeSet<String> {
        let mut ids: Vec<String> = self.counters.lock().unwrap().keys().cloned().collect();
        ids.extend(self.gauges.lock().unwrap().keys().cloned());
        ids.extend(self.histograms.lock().unwrap().keys().cloned());
        ids.into_iter().map(|id| id.split('{').next().unwrap_or_default().to_owned()).collect()
    }

    fn describe(&self, key: KeyName, unit: Option<Unit>) {
        self.units.lock().unwrap().insert(key.as_str().to_owned(), unit);
    }
}

impl Recorder for TestRecorder {
    fn describe_counter(&self, key: KeyName, unit: Option<Unit>, _: SharedString) {
        self.describe(key, unit);
    }
    fn describe_gauge(&self, key: KeyName, unit: Option<Unit>, _: SharedString) {
        self.describe(key, unit);
    }
    fn describe_histogram(&self, key: KeyName, unit: Option<Unit>, _: SharedString) {
        self.describe(key, unit);
    }
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(self.counters.lock().unwrap().entry(id(key)).or_default().clone())
    }
    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::from_arc(self.gauges.lock().unwrap().entry(id(key)).or_default().clone())
    }
    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::from_arc(self.histograms.lock().unwrap().entry(id(key)).or_default().clone())
    }
}
