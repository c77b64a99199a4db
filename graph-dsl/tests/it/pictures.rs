use crate::common::kitchen_sink;

#[test]
fn show() {
    let wf = kitchen_sink();
    println!("{}", wf.to_dot());
    println!("{}", wf.to_mermaid());
}
