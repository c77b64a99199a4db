//! The `metrics` facade over an OpenTelemetry meter: a [`metrics::Recorder`] whose counters,
//! gauges and histograms are OTel instruments (exported by the pipeline's periodic reader), with
//! the metric's labels as attributes. Optionally beside another recorder (the Prometheus one):
//! every handle then records to both.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use metrics::{
    Counter, CounterFn, Gauge, GaugeFn, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder,
    SharedString, Unit,
};
use opentelemetry::KeyValue;
use opentelemetry::metrics::Meter;

/// A `metrics` recorder over an OpenTelemetry meter (see [`super::Exporter::recorder`]).
pub struct OtelRecorder {
    meter: Meter,
    /// Units and help of the names described so far (the engine describes before registering).
    described: Mutex<HashMap<String, (Option<Unit>, SharedString)>>,
    /// Where every call goes too ([`OtelRecorder::beside`]; a no-op recorder without one).
    beside: Arc<dyn Recorder + Send + Sync>,
}

impl std::fmt::Debug for OtelRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OtelRecorder").finish_non_exhaustive()
    }
}

impl OtelRecorder {
    pub(super) fn new(meter: Meter) -> OtelRecorder {
        OtelRecorder { meter, described: Mutex::default(), beside: Arc::new(metrics::NoopRecorder) }
    }

    /// Records to `other` too (e.g. the Prometheus recorder that `/metrics` renders).
    #[must_use]
    pub fn beside(mut self, other: Arc<dyn Recorder + Send + Sync>) -> OtelRecorder {
        self.beside = other;
        self
    }

    fn describe(&self, key: &KeyName, unit: Option<Unit>, help: SharedString) {
        let mut described = self.described.lock().unwrap_or_else(|e| e.into_inner());
        described.insert(key.as_str().to_owned(), (unit, help));
    }

    /// The name, unit, help and attributes of `key`.
    fn parts(&self, key: &Key) -> (String, Option<&'static str>, String, Vec<KeyValue>) {
        let name = key.name().to_owned();
        let described = self.described.lock().unwrap_or_else(|e| e.into_inner());
        let (unit, help) = match described.get(&name) {
            Some((unit, help)) => (unit.map(|u| u.as_canonical_label()), help.to_string()),
            None => (None, String::new()),
        };
        let attributes =
            key.labels().map(|l| KeyValue::new(l.key().to_owned(), l.value().to_owned())).collect();
        (name, unit, help, attributes)
    }
}

impl Recorder for OtelRecorder {
    fn describe_counter(&self, key: KeyName, unit: Option<Unit>, help: SharedString) {
        self.describe(&key, unit, help.clone());
        self.beside.describe_counter(key, unit, help);
    }

    fn describe_gauge(&self, key: KeyName, unit: Option<Unit>, help: SharedString) {
        self.describe(&key, unit, help.clone());
        self.beside.describe_gauge(key, unit, help);
    }

    fn describe_histogram(&self, key: KeyName, unit: Option<Unit>, help: SharedString) {
        self.describe(&key, unit, help.clone());
        self.beside.describe_histogram(key, unit, help);
    }

    fn register_counter(&self, key: &Key, metadata: &Metadata<'_>) -> Counter {
        let (name, unit, help, attributes) = self.parts(key);
        let mut builder = self.meter.u64_counter(name).with_description(help);
        if let Some(unit) = unit {
            builder = builder.with_unit(unit);
        }
        Counter::from_arc(Arc::new(OtelCounter {
            counter: builder.build(),
            attributes,
            last: AtomicU64::new(0),
            beside: self.beside.register_counter(key, metadata),
        }))
    }

    fn register_gauge(&self, key: &Key, metadata: &Metadata<'_>) -> Gauge {
        let (name, unit, help, attributes) = self.parts(key);
        let mut builder = self.meter.f64_gauge(name).with_description(help);
        if let Some(unit) = unit {
            builder = builder.with_unit(unit);
        }
        Gauge::from_arc(Arc::new(OtelGauge {
            gauge: builder.build(),
            attributes,
            value: AtomicU64::new(0f64.to_bits()),
            beside: self.beside.register_gauge(key, metadata),
        }))
    }

    fn register_histogram(&self, key: &Key, metadata: &Metadata<'_>) -> Histogram {
        let (name, unit, help, attributes) = self.parts(key);
        let mut builder = self.meter.f64_histogram(name).with_description(help);
        if let Some(unit) = unit {
            builder = builder.with_unit(unit);
        }
        Histogram::from_arc(Arc::new(OtelHistogram {
            histogram: builder.build(),
            attributes,
            beside: self.beside.register_histogram(key, metadata),
        }))
    }
}

struct OtelCounter {
    counter: opentelemetry::metrics::Counter<u64>,
    attributes: Vec<KeyValue>,
    /// The total so far (an `absolute` becomes the increment since).
    last: AtomicU64,
    /// The same counter of the recorder beside this one (a no-op without one).
    beside: Counter,
}

impl CounterFn for OtelCounter {
    fn increment(&self, value: u64) {
        self.last.fetch_add(value, Ordering::Relaxed);
        self.counter.add(value, &self.attributes);
        self.beside.increment(value);
    }

    fn absolute(&self, value: u64) {
        let before = self.last.fetch_max(value, Ordering::Relaxed);
        self.counter.add(value.saturating_sub(before), &self.attributes);
        self.beside.absolute(value);
    }
}

struct OtelGauge {
    gauge: opentelemetry::metrics::Gauge<f64>,
    attributes: Vec<KeyValue>,
    /// The value as f64 bits (OTel's gauge records values; increments are kept here).
    value: AtomicU64,
    /// The same gauge of the recorder beside this one (a no-op without one).
    beside: Gauge,
}

impl OtelGauge {
    fn update(&self, f: impl Fn(f64) -> f64) {
        let mut now = 0.0;
        let _ = self.value.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
            now = f(f64::from_bits(bits));
            Some(now.to_bits())
        });
        self.gauge.record(now, &self.attributes);
    }
}

impl GaugeFn for OtelGauge {
    fn increment(&self, value: f64) {
        self.update(|v| v + value);
        self.beside.increment(value);
    }

    fn decrement(&self, value: f64) {
        self.update(|v| v - value);
        self.beside.decrement(value);
    }

    fn set(&self, value: f64) {
        self.update(|_| value);
        self.beside.set(value);
    }
}

struct OtelHistogram {
    histogram: opentelemetry::metrics::Histogram<f64>,
    attributes: Vec<KeyValue>,
    /// The same histogram of the recorder beside this one (a no-op without one).
    beside: Histogram,
}

impl HistogramFn for OtelHistogram {
    fn record(&self, value: f64) {
        self.histogram.record(value, &self.attributes);
        self.beside.record(value);
    }
}
