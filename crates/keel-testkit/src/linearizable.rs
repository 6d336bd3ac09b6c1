//! A linearizability checker for concurrent histories of single-key etcd operations.
//!
//! The model is one etcd key, absent when the history starts: `Put`, linearizable `Get`,
//! `Delete` and a compare-and-set `Txn` on that key. Every operation touches exactly one key, so
//! a history is split per key and each key is checked on its own (linearizability is
//! compositional, Herlihy & Wing's locality / porcupine's P-compositionality).
//!
//! Each key is checked with Wing & Gong's backtracking search with Lowe's memoization, as in
//! porcupine's `checkSingle`: call and return entries sorted by time in a doubly linked list
//! (index-based), operations are linearized by lifting their entries out of the list, undone by
//! unlifting them, and a `(linearized set, model state)` cache prunes states already explored.
//! The search is iterative (an explicit stack) and bounded by a step budget: when the budget
//! runs out the answer is [`Verdict::Unknown`], never a hang.
//!
//! An operation whose outcome is unknown (its RPC failed or timed out, its member was killed)
//! may or may not have taken effect, at any point after its invocation: it is recorded with
//! [`Operation::unknown`], i.e. return time [`NEVER`] and [`Output::Unknown`], which matches any
//! output. A `Get` with an unknown outcome has no effect and is dropped by [`check`].
//!
//! A violation is reported as a [`Violation`]: the longest linearizable prefix the search found,
//! the model state after it and the operations that could come next, none of which is
//! consistent with that state.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::time::Instant;

/// Return time of an operation whose outcome is unknown (+infinity).
pub const NEVER: u64 = u64::MAX;

/// What an operation asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// Put `value`.
    Put(String),
    /// Linearizable read (`serializable: false`).
    Get,
    /// Delete the key.
    Delete,
    /// `if value == expected (None: the key is absent) then put(new) else get`.
    Cas {
        /// The value compared against; `None` compares "the key does not exist".
        expected: Option<String>,
        /// The value put when the compare succeeds.
        new: String,
    },
}

/// What an operation returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// A put was acknowledged.
    Put,
    /// The value read (`None`: the key was absent).
    Get(Option<String>),
    /// How many keys a delete removed (0 or 1).
    Delete(u64),
    /// Whether the compare succeeded, and the value the else branch read (`None` on success
    /// or when the key was absent).
    Cas {
        /// The compare succeeded and `new` was put.
        succeeded: bool,
        /// The value read by the else branch.
        seen: Option<String>,
    },
    /// The outcome is unknown; matches any output.
    Unknown,
}

/// One operation of a history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Operation {
    /// The client that issued it (for messages).
    pub client: usize,
    /// The key it touched.
    pub key: String,
    /// Invocation time (nanoseconds since any fixed origin shared by the history).
    pub call: u64,
    /// Return time, [`NEVER`] if the outcome is unknown.
    pub ret: u64,
    /// The request.
    pub input: Input,
    /// The response.
    pub output: Output,
}

impl Operation {
    /// An operation that returned `output` at `ret`.
    pub fn completed(
        client: usize,
        key: &str,
        call: u64,
        ret: u64,
        input: Input,
        output: Output,
    ) -> Operation {
        Operation {
            client,
            key: key.to_string(),
            call,
            ret,
            input,
            output,
        }
    }

    /// An operation invoked at `call` whose outcome is unknown.
    pub fn unknown(client: usize, key: &str, call: u64, input: Input) -> Operation {
        Operation {
            client,
            key: key.to_string(),
            call,
            ret: NEVER,
            input,
            output: Output::Unknown,
        }
    }

    /// Whether the outcome is unknown.
    pub fn is_unknown(&self) -> bool {
        self.output == Output::Unknown
    }
}

/// Nanoseconds since `origin`, for [`Operation`] times.
pub fn nanos_since(origin: Instant) -> u64 {
    origin.elapsed().as_nanos() as u64
}

fn fmt_value(v: &Option<String>) -> String {
    match v {
        Some(v) => format!("{v:?}"),
        None => "<absent>".to_string(),
    }
}

fn fmt_time(t: u64) -> String {
    if t == NEVER {
        "inf".to_string()
    } else {
        format!("{:.3}ms", t as f64 / 1e6)
    }
}

impl fmt::Display for Input {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Input::Put(v) => write!(f, "put({v:?})"),
            Input::Get => write!(f, "get()"),
            Input::Delete => write!(f, "delete()"),
            Input::Cas { expected, new } => {
                write!(f, "cas({} -> {new:?})", fmt_value(expected))
            }
        }
    }
}

impl fmt::Display for Output {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Output::Put => write!(f, "ok"),
            Output::Get(v) => write!(f, "{}", fmt_value(v)),
            Output::Delete(n) => write!(f, "deleted {n}"),
            Output::Cas {
                succeeded: true, ..
            } => write!(f, "succeeded"),
            Output::Cas {
                succeeded: false,
                seen,
            } => write!(f, "failed, saw {}", fmt_value(seen)),
            Output::Unknown => write!(f, "<unknown outcome>"),
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "c{} {} -> {}  [{}, {}]",
            self.client,
            self.input,
            self.output,
            fmt_time(self.call),
            fmt_time(self.ret)
        )
    }
}

/// The outcome of checking one key.
#[derive(Clone, Debug)]
pub enum Verdict {
    /// The key's history is linearizable.
    Linearizable,
    /// It is not.
    Violation(Box<Violation>),
    /// The step budget ran out before an answer; the longest linearizable prefix found so far,
    /// if the search had to backtrack.
    Unknown(Option<Box<Violation>>),
}

/// Why a key's history is not linearizable.
#[derive(Clone, Debug)]
pub struct Violation {
    /// The longest linearizable prefix the search found, in linearization order.
    pub prefix: Vec<Operation>,
    /// The model state (the key's value) after that prefix.
    pub state: Option<String>,
    /// The operations that could be linearized next (invoked before the earliest return among
    /// the rest), none of which is consistent with `state` (or each leads to a dead end). The
    /// last one is the operation with that earliest return, which had to be linearized by then.
    pub stuck: Vec<Operation>,
}

/// The result of checking one key.
#[derive(Clone, Debug)]
pub struct KeyReport {
    /// The key.
    pub key: String,
    /// Operations checked (unknown-outcome reads dropped).
    pub ops: usize,
    /// Of which with an unknown outcome.
    pub unknown: usize,
    /// Search steps taken.
    pub steps: u64,
    /// The answer.
    pub verdict: Verdict,
}

impl KeyReport {
    /// Whether the key's history is linearizable.
    pub fn is_linearizable(&self) -> bool {
        matches!(self.verdict, Verdict::Linearizable)
    }
}

/// How many operations of the prefix a report shows.
const PREFIX_SHOWN: usize = 12;

impl fmt::Display for KeyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let head = format!(
            "key {:?} ({} ops, {} with unknown outcome, {} steps)",
            self.key, self.ops, self.unknown, self.steps
        );
        match &self.verdict {
            Verdict::Linearizable => write!(f, "{head}: linearizable"),
            Verdict::Unknown(partial) => {
                writeln!(
                    f,
                    "{head}: UNKNOWN, the checker's step budget ran out (make the history \
                     smaller or with fewer unknown outcomes)"
                )?;
                match partial {
                    Some(v) => v.describe(f, self.ops),
                    None => Ok(()),
                }
            }
            Verdict::Violation(v) => {
                writeln!(f, "{head}: NOT LINEARIZABLE")?;
                v.describe(f, self.ops)
            }
        }
    }
}

impl Violation {
    /// Writes the prefix (its last operations), the state after it and the stuck operations.
    fn describe(&self, f: &mut fmt::Formatter<'_>, ops: usize) -> fmt::Result {
        writeln!(
            f,
            "  longest linearizable prefix: {} of {ops} ops; its last {}:",
            self.prefix.len(),
            self.prefix.len().min(PREFIX_SHOWN)
        )?;
        for op in &self.prefix[self.prefix.len().saturating_sub(PREFIX_SHOWN)..] {
            writeln!(f, "    {op}")?;
        }
        writeln!(f, "  value after the prefix: {}", fmt_value(&self.state))?;
        writeln!(
            f,
            "  operations that could come next, none consistent with that value \
             (the last one had to be linearized before it returned):"
        )?;
        for op in &self.stuck {
            writeln!(
                f,
                "    {op}   (the model would return {})",
                model_output(&self.state, &op.input)
            )?;
        }
        Ok(())
    }
}

/// What the model returns for `input` in `state`.
fn model_output(state: &Option<String>, input: &Input) -> Output {
    match input {
        Input::Put(_) => Output::Put,
        Input::Get => Output::Get(state.clone()),
        Input::Delete => Output::Delete(state.is_some() as u64),
        Input::Cas { expected, .. } if expected == state => Output::Cas {
            succeeded: true,
            seen: None,
        },
        Input::Cas { .. } => Output::Cas {
            succeeded: false,
            seen: state.clone(),
        },
    }
}

/// Checks a history: splits it per key and checks each key with at most `max_steps` search
/// steps. Unknown-outcome reads are dropped. Returns one report per key, in key order.
///
/// Panics on a malformed operation (an output that does not fit its input, a return before
/// the call).
pub fn check(ops: &[Operation], max_steps: u64) -> Vec<KeyReport> {
    let mut by_key: BTreeMap<&str, Vec<&Operation>> = BTreeMap::new();
    for op in ops {
        if op.input == Input::Get && op.is_unknown() {
            continue;
        }
        by_key.entry(&op.key).or_default().push(op);
    }
    by_key
        .into_iter()
        .map(|(key, ops)| check_key(key, &ops, max_steps))
        .collect()
}

/// A value interned as a small integer; `None` is "absent".
type State = Option<u32>;

/// An input with interned values.
#[derive(Clone, Copy)]
enum In {
    Put(u32),
    Get,
    Delete,
    Cas { expected: State, new: u32 },
}

/// An output with interned values.
#[derive(Clone, Copy)]
enum Out {
    Put,
    Get(State),
    Delete(u64),
    Cas { succeeded: bool, seen: State },
    Unknown,
}

/// The model's transition: the next state if `output` is what `input` returns in `state`.
fn step(state: State, input: In, output: Out) -> Option<State> {
    match (input, output) {
        (In::Put(v), Out::Put | Out::Unknown) => Some(Some(v)),
        (In::Get, Out::Unknown) => Some(state),
        (In::Get, Out::Get(seen)) => (seen == state).then_some(state),
        (In::Delete, Out::Unknown) => Some(None),
        (In::Delete, Out::Delete(n)) => (n == state.is_some() as u64).then_some(None),
        (In::Cas { expected, new }, Out::Unknown) => {
            Some(if state == expected { Some(new) } else { state })
        }
        (In::Cas { expected, new }, Out::Cas { succeeded, seen }) => {
            if state == expected {
                succeeded.then_some(Some(new))
            } else {
                (!succeeded && seen == state).then_some(state)
            }
        }
        _ => unreachable!("inputs and outputs are validated"),
    }
}

/// Interns strings as `u32`s.
#[derive(Default)]
struct Interner(HashMap<String, u32>);

impl Interner {
    fn id(&mut self, s: &str) -> u32 {
        let n = self.0.len() as u32;
        *self.0.entry(s.to_string()).or_insert(n)
    }

    fn opt(&mut self, s: &Option<String>) -> State {
        s.as_deref().map(|s| self.id(s))
    }
}

/// Interns `op`, checking that its output fits its input.
fn intern(values: &mut Interner, op: &Operation) -> (In, Out) {
    assert!(
        op.call <= op.ret,
        "operation returns before it is called: {op}"
    );
    let input = match &op.input {
        Input::Put(v) => In::Put(values.id(v)),
        Input::Get => In::Get,
        Input::Delete => In::Delete,
        Input::Cas { expected, new } => In::Cas {
            expected: values.opt(expected),
            new: values.id(new),
        },
    };
    let output = match (&op.input, &op.output) {
        (_, Output::Unknown) => Out::Unknown,
        (Input::Put(_), Output::Put) => Out::Put,
        (Input::Get, Output::Get(v)) => Out::Get(values.opt(v)),
        (Input::Delete, Output::Delete(n)) => Out::Delete(*n),
        (Input::Cas { .. }, Output::Cas { succeeded, seen }) => Out::Cas {
            succeeded: *succeeded,
            seen: values.opt(seen),
        },
        _ => panic!("output does not fit the input: {op}"),
    };
    (input, output)
}

/// End of the linked list.
const NIL: usize = usize::MAX;
/// The list's head sentinel.
const HEAD: usize = 0;

/// Call/return entries in a doubly linked list over indices (`HEAD` is a sentinel).
struct Entries {
    prev: Vec<usize>,
    next: Vec<usize>,
    /// For a call entry, its return entry; `NIL` for return entries and the head.
    matching: Vec<usize>,
    /// The operation of each entry.
    op: Vec<usize>,
}

impl Entries {
    /// The entries of `ops`, sorted by time; at equal times calls come before returns (so
    /// touching operations count as concurrent, the permissive choice).
    fn new(ops: &[&Operation]) -> Entries {
        // (time, is_return, op)
        let mut sorted: Vec<(u64, bool, usize)> = Vec::with_capacity(2 * ops.len());
        for (i, op) in ops.iter().enumerate() {
            sorted.push((op.call, false, i));
            sorted.push((op.ret, true, i));
        }
        sorted.sort_unstable();
        let len = sorted.len() + 1;
        let mut e = Entries {
            prev: (0..len).map(|i| i.wrapping_sub(1)).collect(),
            next: (1..=len).map(|i| if i == len { NIL } else { i }).collect(),
            matching: vec![NIL; len],
            op: vec![NIL; len],
        };
        e.prev[HEAD] = NIL;
        let mut call_of = vec![NIL; ops.len()];
        for (pos, &(_, is_return, i)) in sorted.iter().enumerate() {
            let node = pos + 1;
            e.op[node] = i;
            if is_return {
                e.matching[call_of[i]] = node;
            } else {
                call_of[i] = node;
            }
        }
        e
    }

    fn is_call(&self, node: usize) -> bool {
        self.matching[node] != NIL
    }

    /// Takes call entry `node` and its return out of the list.
    fn lift(&mut self, node: usize) {
        let (p, n) = (self.prev[node], self.next[node]);
        self.next[p] = n;
        self.prev[n] = p; // a call is always followed by (at least) its return
        let m = self.matching[node];
        let (p, n) = (self.prev[m], self.next[m]);
        self.next[p] = n;
        if n != NIL {
            self.prev[n] = p;
        }
    }

    /// Puts call entry `node` and its return back (undoes the last [`Entries::lift`]).
    fn unlift(&mut self, node: usize) {
        let m = self.matching[node];
        let (p, n) = (self.prev[m], self.next[m]);
        self.next[p] = m;
        if n != NIL {
            self.prev[n] = m;
        }
        let (p, n) = (self.prev[node], self.next[node]);
        self.next[p] = node;
        self.prev[n] = node;
    }
}

/// A set of operation indices.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Bitset(Box<[u64]>);

impl Bitset {
    fn new(n: usize) -> Bitset {
        Bitset(vec![0; n.div_ceil(64)].into_boxed_slice())
    }

    fn set(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }

    fn clear(&mut self, i: usize) {
        self.0[i / 64] &= !(1 << (i % 64));
    }
}

/// Checks the operations of one key (porcupine's `checkSingle`).
fn check_key(key: &str, ops: &[&Operation], max_steps: u64) -> KeyReport {
    let mut values = Interner::default();
    let model: Vec<(In, Out)> = ops.iter().map(|op| intern(&mut values, op)).collect();
    let names: HashMap<u32, &str> = values.0.iter().map(|(s, &i)| (i, s.as_str())).collect();
    let mut entries = Entries::new(ops);

    let mut report = KeyReport {
        key: key.to_string(),
        ops: ops.len(),
        unknown: ops.iter().filter(|op| op.is_unknown()).count(),
        steps: 0,
        verdict: Verdict::Linearizable,
    };
    let mut linearized = Bitset::new(ops.len());
    let mut cache: HashSet<(Bitset, State)> = HashSet::new();
    // The linearized call entries, each with the state before it.
    let mut calls: Vec<(usize, State)> = Vec::new();
    let mut state: State = None;
    let mut longest: Option<Violation> = None;
    let mut node = entries.next[HEAD];
    while entries.next[HEAD] != NIL {
        report.steps += 1;
        if report.steps > max_steps {
            report.verdict = Verdict::Unknown(longest.map(Box::new));
            return report;
        }
        if entries.is_call(node) {
            let i = entries.op[node];
            if let Some(next_state) = step(state, model[i].0, model[i].1) {
                linearized.set(i);
                if cache.insert((linearized.clone(), next_state)) {
                    calls.push((node, state));
                    state = next_state;
                    entries.lift(node);
                    node = entries.next[HEAD];
                    continue;
                }
                linearized.clear(i);
            }
            node = entries.next[node];
        } else {
            // The operation returning here cannot be linearized after the current prefix.
            if longest
                .as_ref()
                .is_none_or(|l| calls.len() > l.prefix.len())
            {
                let blocking = entries.op[node];
                let mut stuck = Vec::new();
                let mut n = entries.next[HEAD];
                while n != node {
                    if entries.is_call(n) && entries.op[n] != blocking {
                        stuck.push(ops[entries.op[n]].clone());
                    }
                    n = entries.next[n];
                }
                stuck.push(ops[blocking].clone());
                longest = Some(Violation {
                    prefix: calls
                        .iter()
                        .map(|&(c, _)| ops[entries.op[c]].clone())
                        .collect(),
                    state: state.map(|v| names[&v].to_string()),
                    stuck,
                });
            }
            let Some((call, before)) = calls.pop() else {
                report.verdict =
                    Verdict::Violation(Box::new(longest.expect("recorded before giving up")));
                return report;
            };
            state = before;
            linearized.clear(entries.op[call]);
            entries.unlift(call);
            node = entries.next[call];
        }
    }
    report
}
