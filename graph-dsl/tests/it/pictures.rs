//! Snapshot tests of the pictures: the expected text is written out here, so any change to
//! the drawing shows up in review.

use cairn_dsl::{END, NodeOutput, Replace, START, Workflow};

use crate::common::{S, builder, kitchen_sink, noop};

const KITCHEN_DOT: &str = r#"digraph "kitchen" {
  label="kitchen v1";
  labelloc=t;
  "__start__" [label="START", shape=circle];
  "__end__" [label="END", shape=doublecircle];
  "plan" [label="plan\n(max 3 visits)", shape=box];
  "search" [label="search", shape=box];
  "read" [label="read", shape=box];
  "merge" [label="merge\n(join: search, read)", shape=box];
  "summarise" [label="summarise\n(map)", shape=box3d];
  subgraph "cluster_deep" {
    label="child v1";
    style=dashed;
    "deep" [label="deep\n(sub-workflow)", shape=component];
    "deep/__end__" [label="END", shape=point];
    "deep/inner" [label="inner", shape=box];
    "deep" -> "deep/inner";
    "deep/inner" -> "deep/__end__";
  }
  "check" [label="check\n(phase)", shape=box];
  "revise" [label="revise\n(max 5 visits)", shape=box];
  "router" [label="router", shape=box];
  "__start__" -> "plan";
  "plan" -> "search";
  "plan" -> "read";
  "search" -> "merge" [style=bold];
  "read" -> "merge" [style=bold];
  "merge" -> "summarise";
  "summarise" -> "deep";
  "deep/__end__" -> "check";
  "check" -> "revise" [style=dashed, label="route"];
  "check" -> "router" [style=dashed, label="route"];
  "revise" -> "check";
  "router" -> "plan" [style=dotted, label="goto"];
  "router" -> "__end__" [style=dotted, label="goto"];
}
"#;

const KITCHEN_MERMAID: &str = r#"flowchart TD
  %% kitchen v1
  begin(("START"))
  done((("END")))
  n0["plan<br/>(max 3 visits)"]
  n1["search"]
  n2["read"]
  n3["merge<br/>(join: search, read)"]
  n4[/"summarise<br/>(map)"/]
  subgraph n5_box ["child v1"]
    n5[["deep<br/>(sub-workflow)"]]
    n5_done(("END"))
    n5_n0["inner"]
    n5 --> n5_n0
    n5_n0 --> n5_done
  end
  n6["check<br/>(phase)"]
  n7["revise<br/>(max 5 visits)"]
  n8["router"]
  begin --> n0
  n0 --> n1
  n0 --> n2
  n1 ==> n3
  n2 ==> n3
  n3 --> n4
  n4 --> n5
  n5_done --> n6
  n6 -. route .-> n7
  n6 -. route .-> n8
  n7 --> n6
  n8 -. goto .-> n0
  n8 -. goto .-> done
"#;

#[test]
fn dot_snapshot() {
    let dot = kitchen_sink().to_dot();
    assert_eq!(dot, KITCHEN_DOT, "actual:\n{dot}");
}

#[test]
fn mermaid_snapshot() {
    let mermaid = kitchen_sink().to_mermaid();
    assert_eq!(mermaid, KITCHEN_MERMAID, "actual:\n{mermaid}");
}

#[test]
fn pictures_are_deterministic() {
    let a = kitchen_sink();
    let b = kitchen_sink();
    assert_eq!(a.to_dot(), b.to_dot());
    assert_eq!(a.to_mermaid(), b.to_mermaid());
}

#[test]
fn names_are_escaped() {
    let wf = builder("say \"hi\"")
        .node("a\"b", noop)
        .node("c\\d<e>", noop)
        .edge(START, "a\"b")
        .edge("a\"b", "c\\d<e>")
        .edge("c\\d<e>", END)
        .build()
        .unwrap();
    assert_eq!(
        wf.to_dot(),
        r#"digraph "say \"hi\"" {
  label="say \"hi\" v1";
  labelloc=t;
  "__start__" [label="START", shape=circle];
  "__end__" [label="END", shape=doublecircle];
  "a\"b" [label="a\"b", shape=box];
  "c\\d<e>" [label="c\\d<e>", shape=box];
  "__start__" -> "a\"b";
  "a\"b" -> "c\\d<e>";
  "c\\d<e>" -> "__end__";
}
"#
    );
    assert_eq!(
        wf.to_mermaid(),
        r#"flowchart TD
  %% say "hi" v1
  begin(("START"))
  done((("END")))
  n0["a#quot;b"]
  n1["c\d#lt;e#gt;"]
  begin --> n0
  n0 --> n1
  n1 --> done
"#
    );
}

#[test]
fn nested_sub_workflows_nest_clusters() {
    let inner = Workflow::<Replace<u32>>::builder("inner", 1)
        .node("x", |_s, _ctx| async { Ok(NodeOutput::none()) })
        .edge(START, "x")
        .edge("x", END)
        .build()
        .unwrap();
    let middle = builder("middle")
        .subgraph("in", inner, |s: &S| s.clone(), |c: &S| c.0)
        .edge(START, "in")
        .edge("in", END)
        .build()
        .unwrap();
    let outer = builder("outer")
        .subgraph("mid", middle, |s: &S| s.clone(), |c: &S| c.0)
        .edge(START, "mid")
        .edge("mid", END)
        .build()
        .unwrap();
    assert_eq!(
        outer.to_dot(),
        r#"digraph "outer" {
  label="outer v1";
  labelloc=t;
  "__start__" [label="START", shape=circle];
  "__end__" [label="END", shape=doublecircle];
  subgraph "cluster_mid" {
    label="middle v1";
    style=dashed;
    "mid" [label="mid\n(sub-workflow)", shape=component];
    "mid/__end__" [label="END", shape=point];
    subgraph "cluster_mid/in" {
      label="inner v1";
      style=dashed;
      "mid/in" [label="in\n(sub-workflow)", shape=component];
      "mid/in/__end__" [label="END", shape=point];
      "mid/in/x" [label="x", shape=box];
      "mid/in" -> "mid/in/x";
      "mid/in/x" -> "mid/in/__end__";
    }
    "mid" -> "mid/in";
    "mid/in/__end__" -> "mid/__end__";
  }
  "__start__" -> "mid";
  "mid/__end__" -> "__end__";
}
"#
    );
    assert_eq!(
        outer.to_mermaid(),
        r#"flowchart TD
  %% outer v1
  begin(("START"))
  done((("END")))
  subgraph n0_box ["middle v1"]
    n0[["mid<br/>(sub-workflow)"]]
    n0_done(("END"))
    subgraph n0_n0_box ["inner v1"]
      n0_n0[["in<br/>(sub-workflow)"]]
      n0_n0_done(("END"))
      n0_n0_n0["x"]
      n0_n0 --> n0_n0_n0
      n0_n0_n0 --> n0_n0_done
    end
    n0 --> n0_n0
    n0_n0_done --> n0_done
  end
  begin --> n0
  n0_done --> done
"#
    );
}
