//! The payments example under the crash kit: the checkout crashed at every I/O operation of its
//! run under every crash model (and at random pairs of operations, a second crash during
//! recovery), recovered, and its charges counted at the payment service. A charge call in
//! flight at a crash runs again; its idempotency key makes the service answer with the charge
//! it made the first time, so no purpose is ever charged twice.
#![allow(missing_docs, reason = "test code")]

use std::io::Write as _;

use cairn_examples::payments::{Checkout, Payments, workflow};
use cairn_testkit::{CrashCase, CrashHarness, Summary};

#[test]
fn a_crashed_checkout_never_charges_twice() {
    let payments = Payments::default();
    let input = Checkout {
        order: "order-7".into(),
        items_cents: 4_200,
        shipping_cents: 450,
        ..Checkout::default()
    };
    let harness = CrashHarness::new(&workflow(&payments).unwrap(), input).unwrap();
    let reference = harness.reference().unwrap();
    let mut cases = CrashCase::every(&reference.ops, reference.start_len);
    let ops = reference.ops.len() as u64;
    cases.extend(
        (0..64_u64).map(|i| CrashCase::random(0x9A7 ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15), ops)),
    );
    let (mut summary, mut requests, mut charges, mut deduplicated, mut double, mut repeated) =
        (Summary::default(), 0, 0, 0, 0, 0);
    for case in &cases {
        payments.reset();
        let report = harness.check(case).unwrap();
        // A crash model outside redb's media contract may leave no usable database (no data,
        // never wrong data): nothing was charged after it.
        let recovered = report.unrecoverable == 0;
        summary.add(report);
        let ledger = payments.ledger();
        requests += ledger.requests;
        charges += ledger.charges.values().sum::<u64>();
        deduplicated += ledger.deduplicated;
        double += ledger.double_charges();
        repeated += ledger.repeated_requests();
        if recovered {
            assert_eq!(ledger.charges.len(), 2, "{case}: both purposes charged: {ledger:?}");
        }
    }
    // Straight to the process's stderr (not the test's captured output), as every RELIABILITY
    // line of the suite.
    let mut err = std::io::stderr().lock();
    let _ = writeln!(
        err,
        "RELIABILITY payments cases={} charges={charges} requests={requests} \
         deduplicated_by_key={deduplicated} double_charges={double} \
         double_charges_without_keys={repeated}",
        cases.len()
    );
    assert!(summary.is_clean(), "{}", summary.failure_report(5));
    assert_eq!(double, 0, "a purpose was charged twice");
    // The sweep reaches calls in flight at a crash (run again after it): without the key,
    // each of those would have been a second charge.
    assert!(repeated > 0 && deduplicated == repeated, "no call ran again: the test shows nothing");
}
