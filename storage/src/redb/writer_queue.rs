//! Where callers leave commands for the group-commit writer, and where the writer rests
//! between groups.
//!
//! The writer (`W`: `super::writer::Writer`, with its commands `C`) is one value that applies groups in turn. Its std thread takes it
//! from here with the next command and puts it back once that command is done. A caller with
//! a hand-over may take it instead ([`WriterQueue::take_idle`]) when nothing is queued before
//! the hand-over and the writer rests: it then commits its own group on its own thread, without
//! two thread switches (one to wake the writer's thread, one to wake the caller with the
//! answer). Because commands and the resting writer are under one lock, nothing queued before
//! a caller's hand-over can be applied after it.
//!
//! The queue is bounded (`Options::queue_depth`): a sender waits while it is full. Waiters are
//! counted, so a send or a take wakes a thread only when one waits (a condition variable's
//! notify is a system call even with nobody waiting).

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// The writer's queue, and the writer while no group is being applied.
pub(crate) struct WriterQueue<C, W> {
    state: Mutex<State<C, W>>,
    /// The writer's thread waits here for a command, or for the writer to come back.
    arrived: Condvar,
    /// Senders of a full queue wait here.
    room: Condvar,
    depth: usize,
}

struct State<C, W> {
    commands: VecDeque<C>,
    /// The writer while it rests; `None` while the writer's thread or a caller applies a group
    /// (or once the writer stopped).
    resting: Option<Box<W>>,
    /// The writer stopped: commands are refused.
    closed: bool,
    /// Whether the writer's thread waits on `arrived`.
    thread_waits: bool,
    /// Senders waiting on `room`.
    senders_wait: usize,
}

/// What the writer's thread takes for its next turn.
pub(crate) enum Turn<C, W> {
    /// The writer, and the command to carry out.
    Command(Box<W>, C),
    /// The writer, taken because its due time (a periodic flush, a reopen) came.
    Due(Box<W>),
}

impl<C, W> WriterQueue<C, W> {
    /// An empty queue of `depth` commands (at least one), with no writer resting yet.
    pub(crate) fn new(depth: usize) -> WriterQueue<C, W> {
        WriterQueue {
            state: Mutex::new(State {
                commands: VecDeque::new(),
                resting: None,
                closed: false,
                thread_waits: false,
                senders_wait: 0,
            }),
            arrived: Condvar::new(),
            room: Condvar::new(),
            depth: depth.max(1),
        }
    }

    fn state(&self) -> MutexGuard<'_, State<C, W>> {
        // Nothing panics while this lock is held: the data stays valid.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `command`, waiting while the queue is full; gives it back once the writer stopped.
    pub(crate) fn send(&self, command: C) -> Result<(), C> {
        let mut state = self.state();
        while !state.closed && state.commands.len() >= self.depth {
            state.senders_wait += 1;
            state = self.room.wait(state).unwrap_or_else(PoisonError::into_inner);
            state.senders_wait -= 1;
        }
        if state.closed {
            return Err(command);
        }
        state.commands.push_back(command);
        self.wake_thread(state);
        Ok(())
    }

    /// Queues `command` unless the queue is full or the writer stopped; whether it did.
    pub(crate) fn try_send(&self, command: C) -> bool {
        let mut state = self.state();
        if state.closed || state.commands.len() >= self.depth {
            return false;
        }
        state.commands.push_back(command);
        self.wake_thread(state);
        true
    }

    fn wake_thread(&self, state: MutexGuard<'_, State<C, W>>) {
        let wake = state.thread_waits;
        drop(state);
        if wake {
            self.arrived.notify_one();
        }
    }

    /// Takes the next queued command, if any (the writer's thread, while it gathers a group).
    pub(crate) fn try_recv(&self) -> Option<C> {
        let mut state = self.state();
        let command = state.commands.pop_front();
        self.made_room(state);
        command
    }

    /// Takes the next command, waiting for one until `deadline` (the writer's thread, while it
    /// gathers a group).
    pub(crate) fn recv_until(&self, deadline: Instant) -> Option<C> {
        let mut state = self.state();
        loop {
            if let Some(command) = state.commands.pop_front() {
                self.made_room(state);
                return Some(command);
            }
            let now = Instant::now();
            if now >= deadline || state.closed {
                return None;
            }
            state = self.wait_arrived(state, Some(deadline - now));
        }
    }

    fn made_room(&self, state: MutexGuard<'_, State<C, W>>) {
        let wake = state.senders_wait > 0;
        drop(state);
        if wake {
            self.room.notify_one();
        }
    }

    fn wait_arrived<'a>(
        &'a self,
        mut state: MutexGuard<'a, State<C, W>>,
        timeout: Option<Duration>,
    ) -> MutexGuard<'a, State<C, W>> {
        state.thread_waits = true;
        let mut state = match timeout {
            Some(timeout) => {
                self.arrived.wait_timeout(state, timeout).unwrap_or_else(PoisonError::into_inner).0
            }
            None => self.arrived.wait(state).unwrap_or_else(PoisonError::into_inner),
        };
        state.thread_waits = false;
        state
    }

    /// The writer's thread's next turn: blocks until a command is queued and the writer rests
    /// (then takes both), or until the time the resting writer says is `due` (the wait left
    /// before a periodic flush or a reopen) has passed (then takes the writer alone); `None` once
    /// the queue is closed.
    pub(crate) fn next_turn(&self, due: impl Fn(&mut W) -> Option<Duration>) -> Option<Turn<C, W>> {
        let mut state = self.state();
        loop {
            if state.closed {
                return None;
            }
            let Some(writer) = state.resting.as_deref_mut() else {
                state = self.wait_arrived(state, None);
                continue;
            };
            let due = due(writer);
            if let Some(command) = state.commands.pop_front() {
                let writer = state.resting.take().expect("the writer rests");
                self.made_room(state);
                return Some(Turn::Command(writer, command));
            }
            if due == Some(Duration::ZERO) {
                return Some(Turn::Due(state.resting.take().expect("the writer rests")));
            }
            state = self.wait_arrived(state, due);
        }
    }

    /// Puts the writer back to rest; wakes the writer's thread if a command waits for it, or
    /// if `wake` (its `due` instant changed).
    pub(crate) fn rest(&self, writer: Box<W>, wake: bool) {
        let mut state = self.state();
        state.resting = Some(writer);
        let wake = state.thread_waits && (wake || !state.commands.is_empty());
        drop(state);
        if wake {
            self.arrived.notify_one();
        }
    }

    /// The resting writer, for a caller to commit a hand-over with on its own thread: only when
    /// nothing is queued (before the caller's hand-over) and `may` says the writer may do so.
    pub(crate) fn take_idle(&self, may: impl FnOnce(&W) -> bool) -> Option<Box<W>> {
        let mut state = self.state();
        if state.closed || !state.commands.is_empty() {
            return None;
        }
        if !may(state.resting.as_deref()?) {
            return None;
        }
        state.resting.take()
    }

    /// Refuses commands from now on and returns those still queued (the writer's thread, as it
    /// stops); senders waiting for room get theirs back.
    pub(crate) fn close(&self) -> Vec<C> {
        let mut state = self.state();
        state.closed = true;
        let queued = state.commands.drain(..).collect();
        drop(state);
        self.room.notify_all();
        queued
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    /// A queue of commands (numbers) for a writer (a name).
    type Queue = WriterQueue<u32, &'static str>;

    /// A full queue holds its senders until the writer takes a command; a closed one refuses
    /// them, and gives back what it held.
    #[test]
    fn a_full_queue_holds_senders_and_a_closed_one_refuses_them() {
        let queue = Arc::new(Queue::new(1));
        queue.rest(Box::new("writer"), false);
        assert!(queue.send(1).is_ok());
        assert!(!queue.try_send(2), "a full queue took a command");
        let sender = {
            let queue = queue.clone();
            std::thread::spawn(move || queue.send(3).is_ok())
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(!sender.is_finished(), "a sender of a full queue went on");
        assert_eq!(queue.try_recv(), Some(1));
        assert!(sender.join().expect("sender"), "sent once there was room");
        assert_eq!(queue.close(), vec![3], "the queued command given back");
        assert_eq!(queue.send(4), Err(4), "a closed queue took a command");
        assert!(queue.take_idle(|_| true).is_none(), "a closed queue lent its writer");
    }

    /// The writer's thread waits for the writer when a caller holds it, and takes its turn
    /// with the command queued meanwhile once the writer is back; its own work comes when due.
    #[test]
    fn the_writers_thread_takes_turns_with_callers() {
        let queue = Arc::new(Queue::new(4));
        queue.rest(Box::new("writer"), false);
        let writer = queue.take_idle(|_| true).expect("resting");
        let thread = {
            let queue = queue.clone();
            std::thread::spawn(move || match queue.next_turn(|_| None) {
                Some(Turn::Command(writer, 7)) => queue.rest(writer, false),
                _ => panic!("not the queued command"),
            })
        };
        assert!(queue.send(7).is_ok());
        std::thread::sleep(Duration::from_millis(50));
        assert!(!thread.is_finished(), "the thread took a turn without the writer");
        queue.rest(writer, false);
        thread.join().expect("turn taken");
        assert!(queue.take_idle(|_| false).is_none(), "lent against its condition");
        let due = queue.next_turn(|_| Some(Duration::ZERO));
        assert!(matches!(due, Some(Turn::Due(_))), "no turn when due");
    }
}
