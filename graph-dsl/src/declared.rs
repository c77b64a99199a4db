//! Typed names: a signal or query name together with the types its values take, so that a
//! declaration ([`WorkflowBuilder::signal`](crate::WorkflowBuilder::signal),
//! [`WorkflowBuilder::query`](crate::WorkflowBuilder::query)), a receiver ([`Ctx::recv`](crate::Ctx::recv))
//! and a sender (the engine's typed thread handle) written with the same [`SignalDef`] or
//! [`QueryDef`] agree on the types at compile time. A plain string still names one, untyped.

use std::fmt;
use std::marker::PhantomData;

/// A signal's name and the type `T` of its values.
///
/// # Examples
/// ```
/// use cairn_dsl::{Ctx, NodeOutput, Replace, SignalDef, Workflow, END, START};
/// const DELIVERED: SignalDef<String> = SignalDef::new("delivered");
/// let wf = Workflow::<Replace<String>>::builder("parcel", 1)
///     .node("wait", |_s, ctx: Ctx| async move {
///         let place = ctx.recv(DELIVERED).await?; // a String
///         Ok(NodeOutput::update(place))
///     })
///     .edge(START, "wait")
///     .edge("wait", END)
///     .signal(DELIVERED)
///     .build()?;
/// assert_eq!(wf.as_dyn().signal_type("delivered"), Some("String"));
/// # Ok::<(), cairn_dsl::BuildError>(())
/// ```
pub struct SignalDef<T> {
    name: &'static str,
    _value: PhantomData<fn(T) -> T>,
}

/// A query's name, the type `A` of its arguments and `R` of its answer.
///
/// # Examples
/// ```
/// use cairn_dsl::{NodeOutput, QueryDef, Replace, Workflow, END, START};
/// const LENGTH: QueryDef<(), usize> = QueryDef::new("length");
/// let wf = Workflow::<Replace<String>>::builder("doc", 1)
///     .node("n", |s, _ctx| async move { Ok(NodeOutput::update(s.0.clone())) })
///     .edge(START, "n")
///     .edge("n", END)
///     .query(LENGTH, |s: &Replace<String>, (): ()| s.0.len())
///     .build()?;
/// assert_eq!(wf.as_dyn().query_names(), ["length"]);
/// # Ok::<(), cairn_dsl::BuildError>(())
/// ```
pub struct QueryDef<A, R> {
    name: &'static str,
    _types: PhantomData<fn(A) -> R>,
}

/// An update's name, the type `A` of its arguments and `R` of its reply
/// ([`WorkflowBuilder::update`](crate::WorkflowBuilder::update)).
///
/// # Examples
/// ```
/// use cairn_dsl::{NodeOutput, Replace, UpdateDef, Workflow, END, START};
/// const ADD: UpdateDef<u32, u32> = UpdateDef::new("add");
/// let wf = Workflow::<Replace<u32>>::builder("counter", 1)
///     .node("n", |_s, _ctx| async { Ok(NodeOutput::none()) })
///     .edge(START, "n")
///     .edge("n", END)
///     .update(ADD, |_s: &Replace<u32>, _by: &u32| Ok(()), |s: &mut Replace<u32>, by: u32| {
///         s.0 += by;
///         Ok(s.0)
///     })
///     .build()?;
/// assert_eq!(wf.as_dyn().update_names(), ["add"]);
/// # Ok::<(), cairn_dsl::BuildError>(())
/// ```
pub struct UpdateDef<A, R> {
    name: &'static str,
    _types: PhantomData<fn(A) -> R>,
}

impl<A, R> UpdateDef<A, R> {
    /// The update `name`, called with an `A`, replying an `R`.
    pub const fn new(name: &'static str) -> Self {
        Self { name, _types: PhantomData }
    }

    /// Its name.
    pub const fn name(&self) -> &'static str {
        self.name
    }
}

impl<A, R> Clone for UpdateDef<A, R> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<A, R> Copy for UpdateDef<A, R> {}

impl<A, R> fmt::Debug for UpdateDef<A, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (a, r) = (std::any::type_name::<A>(), std::any::type_name::<R>());
        write!(f, "UpdateDef({:?}: {a} -> {r})", self.name)
    }
}

/// What names an update called with an `A`, replying an `R`: an [`UpdateDef<A, R>`] (typed),
/// or a string (any types).
pub trait UpdateName<A, R> {
    /// The name.
    fn update_name(&self) -> &str;
}

impl<A, R> UpdateName<A, R> for UpdateDef<A, R> {
    fn update_name(&self) -> &str {
        self.name
    }
}

impl<A, R> UpdateName<A, R> for &UpdateDef<A, R> {
    fn update_name(&self) -> &str {
        self.name
    }
}

impl<T> SignalDef<T> {
    /// The signal `name`, whose values are `T`s.
    pub const fn new(name: &'static str) -> Self {
        Self { name, _value: PhantomData }
    }

    /// Its name.
    pub const fn name(&self) -> &'static str {
        self.name
    }
}

impl<A, R> QueryDef<A, R> {
    /// The query `name`, asked with an `A`, answering an `R`.
    pub const fn new(name: &'static str) -> Self {
        Self { name, _types: PhantomData }
    }

    /// Its name.
    pub const fn name(&self) -> &'static str {
        self.name
    }
}

// Copy and Clone whatever the types: a definition holds only a name.
impl<T> Clone for SignalDef<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for SignalDef<T> {}
impl<A, R> Clone for QueryDef<A, R> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<A, R> Copy for QueryDef<A, R> {}

impl<T> fmt::Debug for SignalDef<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SignalDef({:?}: {})", self.name, std::any::type_name::<T>())
    }
}

impl<A, R> fmt::Debug for QueryDef<A, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (a, r) = (std::any::type_name::<A>(), std::any::type_name::<R>());
        write!(f, "QueryDef({:?}: {a} -> {r})", self.name)
    }
}

/// What names a signal whose values are `T`s: a [`SignalDef<T>`] (typed), or a string (any `T`).
pub trait SignalName<T> {
    /// The name.
    fn signal_name(&self) -> &str;
}

/// What names a query asked with an `A`, answering an `R`: a [`QueryDef<A, R>`] (typed), or a
/// string (any types).
pub trait QueryName<A, R> {
    /// The name.
    fn query_name(&self) -> &str;
}

impl<T> SignalName<T> for SignalDef<T> {
    fn signal_name(&self) -> &str {
        self.name
    }
}

impl<T> SignalName<T> for &SignalDef<T> {
    fn signal_name(&self) -> &str {
        self.name
    }
}

impl<A, R> QueryName<A, R> for QueryDef<A, R> {
    fn query_name(&self) -> &str {
        self.name
    }
}

impl<A, R> QueryName<A, R> for &QueryDef<A, R> {
    fn query_name(&self) -> &str {
        self.name
    }
}

/// Strings name signals and queries of any type, as before typed names existed.
macro_rules! untyped_names {
    ($($ty:ty),*) => {$(
        impl<T> SignalName<T> for $ty {
            fn signal_name(&self) -> &str {
                self
            }
        }
        impl<A, R> QueryName<A, R> for $ty {
            fn query_name(&self) -> &str {
                self
            }
        }
        impl<A, R> UpdateName<A, R> for $ty {
            fn update_name(&self) -> &str {
                self
            }
        }
    )*};
}
untyped_names!(&str, String, &String);
