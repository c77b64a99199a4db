//! Every example runs, with its outcome asserted.
#![allow(missing_docs, reason = "test code")]

fn db(name: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    (dir, path)
}

#[tokio::test]
async fn quickstart() {
    let (_d, p) = db("q.db");
    let out = cairn_examples::quickstart::run(&p).await.unwrap();
    assert_eq!(out.words, 3);
    assert_eq!(out.shout, "HELLO DURABLE WORLD");
}

#[tokio::test]
async fn routing_with_a_bounded_loop() {
    let (_d, p) = db("r.db");
    let (easy, hard) = cairn_examples::routing::run(&p).await.unwrap();
    assert_eq!(easy.drafts, vec![3, 6, 9]);
    assert!(easy.approved);
    assert_eq!(hard.drafts, vec![3, 6, 9, 12], "stops at the loop bound");
    assert!(!hard.approved);
}

#[tokio::test]
async fn a_polling_loop_continues_as_new_and_carries_its_cursor() {
    use cairn_examples::polling_loop::{FEED_ITEMS, POLLS_PER_RUN, run};
    let (_d, p) = db("poll.db");
    let s = run(&p).await.unwrap();
    // 12 polls read the 23 items, the 13th finds none: 5 polls a thread, 3 threads.
    assert_eq!(s.links, ["poller", "poller~1", "poller~2"]);
    assert_eq!(s.status, cairn::ThreadStatus::Completed);
    assert_eq!((s.last.cursor, s.last.seen, s.last.polls), (FEED_ITEMS, FEED_ITEMS, 13));
    assert!(s.last.done);
    // Every log holds one thread's polls (a few events each), not the loop's 13.
    assert!(s.events.iter().all(|e| *e <= 7 * POLLS_PER_RUN as usize), "{:?}", s.events);
}

#[tokio::test]
async fn a_patched_rule_keeps_old_orders_on_the_old_branch_and_new_ones_on_the_new() {
    use cairn_examples::vat_patch::run;
    let (_d, p) = db("vat.db");
    let s = run(&p).await.unwrap();
    // old-1 was priced under the old code: it needs the old branch, new-1 does not.
    assert_eq!(s.unpatched, ["old-1"]);
    assert_eq!((s.old.gross, s.old.paid), (12_000, true));
    assert_eq!((s.new.gross, s.new.paid), (12_100, true));
    assert_eq!(s.statuses, [cairn::ThreadStatus::Completed; 2]);
    assert_eq!(s.diverged, [false, false]);
}

#[tokio::test]
async fn versioned_workers_leave_another_builds_thread_until_it_is_repinned() {
    use cairn::ThreadStatus::{Completed, WaitingInput};
    use cairn_examples::versioned_workers::{NEW_BUILD, OLD_BUILD, run};
    let (_d, p) = db("approvals.db");
    let s = run(&p).await.unwrap();
    let (old, new) = (Some(OLD_BUILD.to_owned()), Some(NEW_BUILD.to_owned()));
    assert_eq!(s.drain_at_open, [(None, 1), (old, 1), (new.clone(), 0)]);
    assert_eq!(
        (s.free, s.pinned_before_repin, s.pinned_after_repin),
        (Completed, WaitingInput, Completed)
    );
    assert_eq!(s.drain_at_end, [(None, 0), (new, 0)]);
}

#[tokio::test]
async fn orders_are_found_by_their_labels_and_status() {
    let (_d, p) = db("orders.db");
    let s = cairn_examples::order_search::run(&p).await.unwrap();
    // c-2 has o-2, o-3 and o-5; o-3 was paid and moved on to shipping.
    assert_eq!(s.c2_waiting, ["o-2", "o-5"]);
    assert_eq!(s.shipping, ["o-1", "o-3"]);
}

#[tokio::test]
async fn map_reduce_in_item_order() {
    let (_d, p) = db("m.db");
    let out = cairn_examples::map_reduce::run(&p).await.unwrap();
    assert_eq!(out.summaries, vec!["alpha", "beta", "gamma", "delta", "epsilon"]);
    assert_eq!(out.total, 5 + 4 + 5 + 5 + 7);
}

#[tokio::test]
async fn subworkflow_as_a_child_thread() {
    let (_d, p) = db("s.db");
    let (order, children) = cairn_examples::subworkflow::run(&p).await.unwrap();
    assert_eq!(order.total, 2_200);
    assert!(order.shipped);
    assert_eq!(children.len(), 1, "{children:?}");
}

#[tokio::test]
async fn bookmarks_resume_and_read_since() {
    let (_d, p) = db("b.db");
    let seen = cairn_examples::bookmarks::run(&p).await.unwrap();
    assert_eq!(seen.value, 5);
    let expected: Vec<u64> = (seen.bookmark_seq + 1..=*seen.since.last().unwrap()).collect();
    assert_eq!(seen.since, expected, "every event after the bookmark, once, in order");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn research_pipeline_fails_in_code_and_recovers_from_the_phase_checkpoint() {
    use cairn::storage::CheckpointKind;
    let (_d, p) = db("research.db");
    let report = cairn_examples::research_pipeline::run(&p).await.unwrap();
    assert_eq!(report.original_status, cairn::ThreadStatus::Failed);
    assert_eq!(report.code_attempts, 3, "retried before the recovery policy stepped in");
    let s = &report.session;
    assert_eq!(s.sandbox, "cpu", "the fork took the fallback sandbox");
    assert_eq!(s.completed_phases, ["idea", "planning", "code", "analysis"]);
    assert!(s.artifact.as_deref().unwrap().ends_with("on cpu"), "{s:?}");
    assert!(s.analysis.as_deref().unwrap().starts_with("analysis: ran 3 experiments"));
    let kinds: Vec<CheckpointKind> = report.checkpoint_kinds.iter().map(|(k, _)| *k).collect();
    for kind in [
        CheckpointKind::Periodic,
        CheckpointKind::Phase,
        CheckpointKind::Manual,
        CheckpointKind::Failure,
    ] {
        assert!(kinds.contains(&kind), "{kind} missing from {kinds:?}");
    }

    // The database tells the story: the fork names its parent and fork point, and the
    // messages of one correlation id span the module threads.
    let engine = cairn::Engine::builder(&p).read_only().open().await.unwrap();
    let fork = engine.store().thread(&cairn::ThreadId::new(&report.recovered).unwrap());
    let fork = fork.wait().unwrap().unwrap();
    assert_eq!(
        fork.parent,
        Some((cairn::ThreadId::new("session_001").unwrap(), cairn::Seq(report.forked_at)))
    );
    let corr = cairn_examples::research_pipeline::correlation("session_001", "idea_normalization");
    let mut tagged = 0;
    let mut after = cairn::Lsn(0);
    loop {
        let events = engine.store().read_all_since(after, 1_000).wait().unwrap();
        let Some(last) = events.last() else { break };
        after = last.bookmark.lsn;
        for e in events {
            let rec = cairn::blocking::decode(engine.store().as_ref(), e).unwrap();
            if let cairn::event::Body::Message { message, .. } = rec.body {
                tagged += usize::from(message.correlation_id.as_deref() == Some(corr.as_str()));
            }
        }
    }
    assert!(tagged >= 2, "the module's output and the user's reply: {tagged}");
    // A bundle of the failed session reads back.
    let bundle = cairn_tools::Operator::new(&engine)
        .export_bundle("session_001", &Default::default())
        .await
        .unwrap();
    cairn_tools::debug::Bundle::from_bytes(&bundle.to_bytes(true).unwrap()).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn human_input_waits_across_a_restart() {
    use cairn::ThreadStatus::WaitingInput;
    use cairn_examples::human_input::{REPORTS, run};
    let (_d, p) = db("approvals.db");
    let s = run(&p).await.unwrap();
    let waiting: Vec<_> = REPORTS.iter().map(|r| (r.to_string(), WaitingInput)).collect();
    assert_eq!(s.before_restart, waiting);
    assert_eq!(s.after_restart, waiting, "still waiting after the reopen, nothing lost");
    assert_eq!(s.prompt["requester"], "ada");
    assert_eq!(s.prompt["amount_cents"], 12_900);
    let yes = s.approved.decision.as_ref().unwrap();
    assert!(yes.approved && yes.approver == "carol");
    assert_eq!(s.approved.transfer.as_deref(), Some("tr-expense-approve-12900"));
    assert_eq!(s.approved.notice, None);
    assert!(!s.rejected.decision.as_ref().unwrap().approved);
    assert_eq!(s.rejected.transfer, None, "a rejected report is never paid");
    assert!(s.rejected.notice.as_deref().unwrap().ends_with("over the limit"));
    assert!(s.late_answer_error.contains("not waiting for input"), "{}", s.late_answer_error);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credit_updates_are_validated_applied_once_and_seen_by_the_thread() {
    use cairn_examples::credit_updates::run;
    let (_d, p) = db("credit.db");
    let s = run(&p).await.unwrap();
    assert_eq!(s.first_reply, 1_000, "the old limit");
    assert!(s.refused.contains("over the cap of 10000"), "{}", s.refused);
    assert_eq!((s.retried_reply, s.retry_was_duplicate), (1_000, true), "the recorded reply");
    assert_eq!((s.decided.limit, s.decided.decision.as_deref()), (2_500, Some("approved")));
    assert_eq!((s.started.limit, s.started.decision.as_deref()), (800, Some("declined")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn order_signals_are_received_in_order_across_a_restart() {
    use cairn_examples::order_signals::run;
    let (_d, p) = db("orders.db");
    let s = run(&p).await.unwrap();
    assert_eq!(s.after_first_payment, cairn::ThreadStatus::WaitingInput, "waits for the rest");
    assert_eq!(s.shipped.payments, vec![2_000, 3_000], "each payment once, in order");
    assert_eq!(s.shipped.tracking.as_deref(), Some("1Z-999"));
    assert_eq!(s.cancelled.cancelled.as_deref(), Some("the customer changed their mind"));
    assert!(s.cancelled.payments.is_empty() && s.cancelled.tracking.is_none());
    assert!(s.late_signal_error.contains("no more signals"), "{}", s.late_signal_error);
    let wrong = &s.wrong_type_error;
    assert!(wrong.contains(r#"signal "payment" takes a Payment"#), "{wrong}");
    assert!(wrong.contains("missing field `amount_cents`"), "{wrong}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sealed_orders_keep_the_card_out_of_the_file_across_a_key_rotation() {
    use cairn_examples::sealed_orders::{CARD, run};
    let (_d, p) = db("sealed.db");
    let s = run(&p).await.unwrap();
    for order in [&s.first, &s.second] {
        assert_eq!(order.card, CARD);
        assert_eq!(order.receipt.as_deref(), Some("receipt for card ending 1111"));
    }
    assert_eq!(
        (s.first.approved_by.as_deref(), s.second.approved_by.as_deref()),
        (Some("ann"), Some("bob"))
    );
    assert!(!s.card_in_file, "the card number is sealed");
    assert!(s.without_key.contains("sealed with key k1"), "{}", s.without_key);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::print_stdout, reason = "the test reports the concurrency it saw")]
async fn job_engine_runs_every_job_to_its_known_outcome() {
    use cairn::ThreadStatus::{Completed, Failed};
    use cairn_examples::job_engine::{CONCURRENCY, JOBS, MAX_ATTEMPTS, collatz_steps, faults, run};
    let (_d, p) = db("jobs.db");
    let s = run(&p).await.unwrap();
    assert_eq!(s.rows.len(), JOBS as usize);
    let expect = |outcome: &str| s.by_outcome.get(outcome).copied().unwrap_or(0);
    // The job list's faults fix every count: 20 fail once, 8 hang once, 5 always hang, 4 have
    // bad input, 4 always fail.
    assert_eq!(expect("after_retry"), 20, "{:?}", s.by_outcome);
    assert_eq!(expect("after_timeout"), 8, "{:?}", s.by_outcome);
    assert_eq!(expect("failed_timeout"), 5, "{:?}", s.by_outcome);
    assert_eq!(expect("failed_fatal"), 4, "{:?}", s.by_outcome);
    assert_eq!(expect("failed_retries"), 4, "{:?}", s.by_outcome);
    assert_eq!(expect("first_try"), 159, "{:?}", s.by_outcome);
    assert_eq!(s.by_status.get(&Completed), Some(&187));
    assert_eq!(s.by_status.get(&Failed), Some(&13));
    for r in &s.rows {
        let f = faults(r.n);
        match r.status {
            Completed => {
                assert_eq!(r.result, Some(collatz_steps(1_000 + u64::from(r.n))), "job {}", r.n);
                assert_eq!(r.attempts, 1 + f.hang_attempts + f.fail_attempts, "job {}", r.n);
                assert_eq!(r.timeouts, f.hang_attempts, "job {}", r.n);
                assert_eq!(r.error, None, "job {}", r.n);
            }
            _ => {
                assert_eq!(r.result, None);
                let attempts = if f.fatal { 1 } else { MAX_ATTEMPTS };
                assert_eq!(r.attempts, attempts, "job {}: a bad input is not retried", r.n);
                assert!(r.error.is_some(), "job {} failed without an error", r.n);
            }
        }
    }
    assert!((1..=CONCURRENCY).contains(&s.max_in_flight), "{} in flight", s.max_in_flight);
    println!("RELIABILITY job_engine jobs={JOBS} max_in_flight={}", s.max_in_flight);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_runtime_routes_writes_cancels_and_resumes() {
    use cairn::ThreadStatus::{Cancelled, Completed};
    use cairn_examples::agent_runtime::router::CacheStats;
    use cairn_examples::agent_runtime::{run, skills::file_lock};
    let (_d, p) = db("agent.db");
    let s = run(&p).await.unwrap();

    // The router: patterns, threshold, model fallback, cache hit and expiry.
    let r: Vec<_> = s
        .routed
        .iter()
        .map(|r| {
            (r.task.as_str(), r.intent.intent.as_str(), r.intent.skill.as_deref(), r.intent.cached)
        })
        .collect();
    assert_eq!(
        r,
        [
            ("task-2", "SUMMARIZE", Some("summarize"), false),
            ("task-3", "SUMMARIZE", Some("summarize"), true),
            ("task-4", "WRITE_ARTICLE", None, false),
            ("task-5", "UNKNOWN", None, false),
            ("task-6", "SUMMARIZE", Some("summarize"), false),
        ]
    );
    assert!(s.routed.iter().all(|r| r.status == Completed));
    assert_eq!(s.routed[2].intent.confidence, 0.5);
    assert!(s.routed[2].reply.as_deref().unwrap().starts_with("I am not sure"));
    assert_eq!(s.routed[3].intent.source, "model");
    assert_eq!(s.routed[0].reply, s.routed[1].reply);
    assert_eq!(s.cache, CacheStats { hits: 1, misses: 6, expired: 1, evicted: 0 });

    // The article: six steps, its file, its lock gone, its cost counted.
    let w = &s.written;
    assert_eq!(w.progress, [1, 2, 3, 4, 5, 6]);
    assert_eq!(w.article.path, "posts/durable-workflows.md");
    assert_eq!(w.file, w.article.document);
    assert!(w.file.starts_with("---\ntitle: durable workflows\ndate: 2026-02-20\n"), "{}", w.file);
    assert_eq!(w.article.saved_bytes, Some(w.file.len() as u64));
    assert!(w.locks_after.is_empty(), "{:?}", w.locks_after);
    assert_eq!(w.telemetry.tool_calls, 4, "route, outline, body, file write");
    assert!(w.telemetry.tokens > 0 && w.telemetry.cost_micros > 0, "{:?}", w.telemetry);

    // Cancelled midway: while its body streamed, holding its file lock.
    let c = &s.cancelled;
    assert_eq!(c.chunks_seen.len(), 1);
    let lock = (file_lock("posts/cancellation.md"), "task-7".to_owned());
    assert_eq!(c.locks_while_writing, [lock]);
    assert_eq!(c.status, Cancelled);
    assert_eq!(c.progress, [1, 2, 3], "stopped in step 3 of 6");
    assert!(c.locks_after.is_empty(), "the lock is released on cancel: {:?}", c.locks_after);
    assert!(!c.file_exists);

    // The crash: both unfinished tasks offered, locks held through the restart; one resumed to
    // the same article as the uninterrupted run, one abandoned.
    let x = &s.restarted;
    assert_eq!(x.resumable, ["task-8", "task-9"]);
    let mut held = x.locks_after_restart.clone();
    held.sort();
    assert_eq!(
        held,
        [
            (file_lock("posts/durable-workflows.md"), "task-8".to_owned()),
            (file_lock("posts/exactly-once-effects.md"), "task-9".to_owned()),
        ]
    );
    assert_eq!(x.resumed_status, Completed);
    assert_eq!(x.resumed, x.uninterrupted, "the same output as a run that never crashed");
    // The outline was recorded before the crash and is not asked again; the body was being
    // streamed (in flight) at the crash and is asked once more.
    let calls: Vec<_> = x.model_calls_after_restart.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    assert_eq!(calls, [("content", 1)]);
    assert_eq!(x.progress, [1, 2, 3, 3, 4, 5, 6], "step 3 began again after the restart");
    assert_eq!(x.abandoned_status, Cancelled);
    assert!(x.locks_after.is_empty(), "{:?}", x.locks_after);
    let on_disk =
        std::fs::read_to_string(p.parent().unwrap().join("agent-out").join(&x.resumed.path));
    assert_eq!(on_disk.unwrap(), x.resumed.document);
    assert_eq!(x.router_after_restart, CacheStats::default(), "the task was not routed again");

    // Usage is recorded under the model's name.
    assert_eq!(w.telemetry.by_model.keys().collect::<Vec<_>>(), ["scripted"]);

    // The watchdog: the UI stopped reading, the stream held the model call, and five minutes on
    // the engine clock later the attempt was cut short; the task failed and let go of its lock.
    let st = &s.stalled;
    let lock = (file_lock("posts/watchdogs.md"), "task-10".to_owned());
    assert_eq!(st.locks_while_stalled, [lock]);
    assert_eq!(st.status, cairn::ThreadStatus::Failed);
    let error = st.error.as_deref().unwrap_or("");
    assert!(error.contains("timed out after 300000 ms"), "{error}");
    assert!(st.locks_after.is_empty(), "{:?}", st.locks_after);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timers_sleep_durably_across_a_shutdown() {
    use cairn::ThreadStatus::{Completed, Sleeping};
    use cairn_examples::timers::{DAY_MS, START_MS, run};
    let (_d, p) = db("reminders.db");
    let s = run(&p).await.unwrap();
    assert_eq!((s.parked, s.due_ms), (Sleeping, START_MS + DAY_MS));
    assert_eq!(s.after_reopen, Sleeping, "re-armed from the log, not due yet");
    assert_eq!(s.finished, Completed);
    assert_eq!(s.sent_at_ms, s.due_ms, "sent when the timer fired, not before");
    assert_eq!(s.sends, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budgets_warn_stop_and_resume_once_raised() {
    use cairn::ThreadStatus::{Completed, Paused};
    use cairn_examples::budgets::{FIRST_BUDGET, PAGES, run};
    let (_d, p) = db("crawl.db");
    let s = run(&p).await.unwrap();
    let events: Vec<_> =
        s.budget_events.iter().map(|(k, b, u, l)| (k.as_str(), b.as_str(), *u, *l)).collect();
    assert_eq!(
        events,
        [("warning", "tool_calls", 3, FIRST_BUDGET), ("exceeded", "tool_calls", 5, FIRST_BUDGET)]
    );
    assert_eq!((s.stopped, s.fetched_when_stopped), (Paused, 5));
    assert_eq!(s.finished, Completed);
    let pages: Vec<_> = s.crawl.fetched.iter().map(|p| p.split(':').next().unwrap()).collect();
    let expected: Vec<_> = (1..=PAGES).map(|n| format!("page {n}")).collect();
    assert_eq!(pages, expected, "every page once, in order");
    assert_eq!(s.crawl.report.as_deref(), Some("8 pages fetched"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn code_change_diverges_blocks_and_migrates() {
    use cairn::ThreadStatus::{Blocked, Completed, WaitingInput};
    use cairn_examples::code_change::run;
    let (_d, p) = db("quotes.db");
    let s = run(&p).await.unwrap();
    assert_eq!(s.parked, WaitingInput);
    assert!(s.divergence.starts_with("step 1, task price"), "{}", s.divergence);
    assert!(s.divergence.contains(r#"{"items":4,"vat":true}"#), "{}", s.divergence);
    assert_eq!(s.after_answer, Blocked);
    assert!(s.blocked_because.contains(&s.divergence), "{}", s.blocked_because);
    assert_eq!(s.finished, Completed);
    assert_eq!(s.quote.currency, "EUR", "migrated to v2");
    assert_eq!(s.quote.price_cents, 5_000, "the recorded v1 price stands: history is not re-run");
    assert_eq!(s.quote.approved_by.as_deref(), Some("dana"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_pauses_at_a_step_boundary_and_resumes_after_a_restart() {
    use cairn::ThreadStatus::{Completed, Paused};
    use cairn_examples::operator::{BATCHES, HELD_BATCH, run};
    let (_d, p) = db("import.db");
    let s = run(&p).await.unwrap();
    assert_eq!((s.paused, s.done_when_paused), (Paused, HELD_BATCH));
    assert_eq!(s.after_restart, Paused, "recovery leaves a paused thread alone");
    assert_eq!(s.resumable_after_restart, ["nightly"]);
    assert_eq!((s.finished, s.done), (Completed, BATCHES));
    assert_eq!(s.imports, BATCHES, "every batch imported once");
}

/// The example binary `name`, which `cargo test` builds beside this test binary.
fn example_binary(name: &str) -> std::path::PathBuf {
    let test = std::env::current_exe().expect("the test binary");
    let profile = test.parent().and_then(std::path::Path::parent).expect("target/<profile>");
    profile.join("examples").join(format!("{name}{}", std::env::consts::EXE_SUFFIX))
}

#[test]
fn research_pipeline_help_names_its_run_command_before_the_cairn_commands() {
    let bin = example_binary("research_pipeline");
    let out = std::process::Command::new(&bin).arg("--help").output();
    let out = out.unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("Usage: research_pipeline run [--db FILE]"), "{help}");
    let (run, cairn) = (help.find("  run ").unwrap(), help.find("Commands:").unwrap());
    assert!(run < cairn, "{help}");
    assert!(help.contains("replay"), "the cairn commands follow: {help}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bundle_round_trips_redacted_and_replays_and_forks_on_another_database() {
    let dir = tempfile::tempdir().unwrap();
    let s = cairn_examples::bundle_round_trip::run(
        &dir.path().join("one.db"),
        &dir.path().join("two.db"),
        &dir.path().join("t.bundle.json.gz"),
    )
    .await
    .unwrap();
    assert!(!s.key_in_bundle, "the API key is redacted before the bundle is written");
    assert_eq!(s.imported, s.original, "the imported thread holds the original's state");
    assert!(s.original.answer.starts_with("[formal] about your billing"), "{:?}", s.original);
    assert!(s.replay_agrees && s.tasks_replayed >= 2, "{s:?}");
    assert_eq!(s.fork.tone, "friendly");
    assert!(s.fork.answer.starts_with("[friendly] about your billing"), "{:?}", s.fork);
    assert!(s.events >= 6 && s.bundle_bytes > 0, "{s:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debounced_indexing_indexes_each_burst_once_and_batches_emails() {
    let (_d, p) = db("index.db");
    let out = cairn_examples::debounced_indexing::run(&p).await.unwrap();
    let runs: std::collections::BTreeMap<String, Vec<String>> = [
        ("guide".to_owned(), vec!["Guid".to_owned()]),
        ("readme".to_owned(), vec!["Read".to_owned()]),
    ]
    .into_iter()
    .collect();
    assert_eq!(out.runs, runs, "one run per document, with its last save");
    assert_eq!(out.superseded, 6);
    let sizes: Vec<usize> = out.sends.iter().map(Vec::len).collect();
    assert_eq!(sizes.iter().sum::<usize>(), 6, "every email sent once: {sizes:?}");
    let limit = cairn_examples::debounced_indexing::BATCH_MAX as usize;
    assert!(sizes.iter().all(|n| *n <= limit), "{sizes:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduled_reports_tick_on_weekdays_and_catch_up_by_policy() {
    use cairn_examples::scheduled_reports::run;
    let (_d, p) = db("reports.db");
    let s = run(&p).await.unwrap();
    let per = |a: usize, g: usize| {
        [("acme-daily".to_owned(), a), ("globex-daily".to_owned(), g)].into_iter().collect()
    };
    assert_eq!(s.first_week, per(5, 5), "Monday to Friday, not Saturday");
    assert_eq!(s.acme_first_local, "09:00");
    // Wednesday 12:00 UTC is past 09:00 in Berlin but not yet in New York: acme missed Monday,
    // Tuesday and Wednesday and starts them all; globex missed Monday and Tuesday and starts
    // the latest.
    assert_eq!(s.caught_up, per(3, 1));
    let skipped: std::collections::BTreeMap<String, u64> =
        [("acme-daily".to_owned(), 0), ("globex-daily".to_owned(), 1)].into_iter().collect();
    assert_eq!(s.skipped, skipped);
    assert_eq!(s.statuses.len(), 14);
    // acme's three caught-up reports waited in the queue: one per tenant at a time.
    let limit = cairn_examples::scheduled_reports::PER_TENANT_MAX as usize;
    assert_eq!(s.most_at_once, per(limit, limit));
    assert!(s.statuses.iter().all(|st| *st == cairn::ThreadStatus::Completed), "{:?}", s.statuses);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observed_serves_its_web_view_and_metrics() {
    let (_d, p) = db("observed.db");
    let seen = cairn_examples::observed::run(&p).await.unwrap();
    let orders = cairn_examples::observed::ORDERS as usize;
    assert_eq!(seen.completed, orders - 1);
    assert_eq!(seen.waiting, format!("order-{orders}"));
    // The first payment attempt of every order that reached it failed, then was retried.
    assert_eq!(seen.payment_failures, cairn_examples::observed::ORDERS - 1);
    assert!(seen.address.ip().is_loopback());
    // Metrics: the engine's own names, counted by this engine's recorder.
    // Steps are labelled by workflow: the sum of the series.
    let steps = seen.metrics.lines().filter(|l| l.starts_with("cairn_steps_total{"));
    let n: f64 = steps.map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap()).sum();
    assert!(
        n >= 3.0 * (orders as f64 - 1.0),
        "price, pay and ship of each completed order: {n} in {}",
        seen.metrics
    );
    assert!(seen.metrics.contains("cairn_retries_total"), "{}", seen.metrics);
    // The web view: the threads page, and the listing it reads.
    assert!(seen.threads_page.contains("<title>Threads"), "{}", seen.threads_page);
    let rows = seen.waiting_listing["threads"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["thread"], seen.waiting.as_str());
    assert_eq!(seen.waiting_listing["counts"]["completed"], orders as u64 - 1);
}

#[tokio::test]
async fn payments_charge_each_purpose_once_under_its_key() {
    let (_d, p) = db("pay.db");
    let shown = cairn_examples::payments::run(&p).await.unwrap();
    let charged: Vec<(String, u64)> = shown
        .checkouts
        .iter()
        .flat_map(|c| c.charges.iter().map(|ch| (ch.purpose.clone(), ch.amount_cents)))
        .collect();
    assert_eq!(charged.len(), 6, "{charged:?}");
    assert_eq!(charged[0], ("order-1/items".to_owned(), 2_500));
    assert_eq!(shown.ledger.requests, 6);
    assert_eq!(shown.ledger.double_charges(), 0);
    // Every call had a key of its own: six different charge ids.
    let ids: std::collections::BTreeSet<_> =
        shown.checkouts.iter().flat_map(|c| c.charges.iter().map(|ch| ch.id.clone())).collect();
    assert_eq!(ids.len(), 6);
}

#[tokio::test]
async fn trip_fails_at_the_car_and_unwinds_the_hotel_then_the_flight() {
    let (_d, p) = db("trip.db");
    let s = cairn_examples::trip::run(&p).await.unwrap();
    assert_eq!(s.status, cairn::ThreadStatus::Failed);
    assert_eq!(
        s.service,
        ["booked flight", "booked hotel", "cancelled hotel-ref", "cancelled flight-ref"]
    );
    assert_eq!(s.unwinding.len(), 5, "{:?}", s.unwinding);
    assert!(s.unwinding[0].starts_with("compensating: 2 undo(s)"), "{:?}", s.unwinding);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_agent_is_approved_in_time_and_escalated_without_an_answer() {
    use cairn_examples::streaming_agent::{Decision, run};
    let (_d, p) = db("streaming.db");
    let seen = run(&p).await.unwrap();
    assert_eq!(seen.tokens.concat(), seen.approved.1.draft, "the tokens make the draft");
    assert!(seen.tokens.len() > 10, "{:?}", seen.tokens);
    assert_eq!(seen.approved.0, cairn::ThreadStatus::Completed);
    assert_eq!(seen.approved.1.decision, Some(Decision::Approved));
    assert_eq!(seen.escalated.1.decision, Some(Decision::Escalated));
    assert_eq!(seen.escalated.1.escalated_to.as_deref(), Some("on-call-reviewer"));
}

#[tokio::test]
async fn events_start_each_subscriber_once_per_event_id() {
    let (_d, p) = db("events.db");
    let s = cairn_examples::order_events::run(&p).await.unwrap();
    assert_eq!((s.deliveries, s.created), (6, 6), "three events, two subscribers, once each");
    let done: Vec<&str> = s.threads.iter().map(|(_, d)| d.as_str()).collect();
    assert_eq!(done, ["invoiced", "shipped"].repeat(3));
    assert_eq!(s.threads[0].0, "event:order-1/invoice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_is_counted_signalled_cancelled_and_reset_by_filter() {
    use cairn::ThreadStatus::{Cancelled, Completed, Failed, WaitingInput};
    use cairn_examples::fleet_batches::{Progress, run};
    let (_d, p) = db("fleet.db");
    let s = run(&p).await.unwrap();
    // Waiting in the EU: o-1, o-5, o-7; in the US: o-2, o-4, o-8; failed: o-3, o-6 (lamps).
    assert_eq!(s.counted, [3, 3, 2], "the dry runs");
    let all = |n| Progress { total: n, done: n, applied: n, skipped: 0 };
    assert_eq!(s.batches, [all(3), all(3), all(2)]);
    let want = [
        ("o-1", Completed),
        ("o-2", Cancelled),
        ("o-3", Failed),
        ("o-3.reset.restock", WaitingInput),
        ("o-4", Cancelled),
        ("o-5", Completed),
        ("o-6", Failed),
        ("o-6.reset.restock", WaitingInput),
        ("o-7", Completed),
        ("o-8", Cancelled),
    ];
    let want: Vec<_> = want.iter().map(|(id, st)| ((*id).to_owned(), *st)).collect();
    assert_eq!(s.statuses, want, "control: only what each filter matched changed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_ticks_are_skipped_or_buffered_by_policy_and_a_backfill_runs_once() {
    use cairn_examples::overlapping_schedules::{Counts, HOUR_MS, START_MS, run};
    let (_d, p) = db("imports.db");
    let s = run(&p).await.unwrap();
    let c = |started, skipped, buffered| Counts { started, skipped, buffered };
    let third = START_MS + 3 * HOUR_MS;
    // skip: ticks 2 and 3 counted skipped; buffer_one: tick 3 replaced tick 2 (skipped).
    assert_eq!(s.overlapped, [c(1, 2, None), c(1, 1, Some(third))]);
    // Once the first run ended: skip starts nothing late; buffer_one starts tick 3 once.
    assert_eq!(s.after, [c(1, 2, None), c(2, 1, None)]);
    let id = |t: u64| cairn::ScheduleSpec::tick_thread_id("buffer", t);
    assert_eq!(s.buffer_runs, [id(START_MS + HOUR_MS), id(third)], "tick 2 never ran");
    let nights: Vec<u64> =
        (0..3).map(|d| START_MS - (3 - d) * 24 * HOUR_MS + 2 * HOUR_MS).collect();
    assert_eq!(s.backfilled, (nights, 0), "02:00 of each night before, once");
}
