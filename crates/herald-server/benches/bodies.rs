//! What hostile bodies cost (issue 29): the work per entry of a create's unknown-field check
//! and of a strategic merge as the number of labels or finalizers grows (flat when each entry
//! is found by hashing, growing with the count when found by a scan), and the refusal of a
//! deeply nested YAML body as its size grows (flat: it stops at the bound).
//!
//! `cargo bench -p herald-server --bench bodies -- --warm-up-time 1 --measurement-time 3`

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use herald_server::registry::patch::{self, PatchKind};
use herald_wire::body::parse_yaml_object;
use herald_wire::schema::GroupVersion;
use herald_wire::schema::known_fields::decode_if_known;
use serde_json::{Value, json};

fn labels_body(n: usize) -> String {
    let labels: serde_json::Map<String, Value> =
        (0..n).map(|i| (format!("l{i}"), json!("v"))).collect();
    json!({"metadata": {"name": "x", "labels": labels},
        "involvedObject": {"kind": "Pod", "name": "p"}})
    .to_string()
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("many_labels_create_check");
    for n in [1_000, 10_000, 100_000] {
        let text = labels_body(n);
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::from_parameter(n), &text, |b, text| {
            b.iter(|| {
                decode_if_known(
                    GroupVersion::CORE_V1,
                    text,
                    std::marker::PhantomData::<Value>,
                )
                .expect("known")
            })
        });
    }
    g.finish();

    let mut g = c.benchmark_group("many_finalizers_strategic_merge");
    for n in [1_000, 10_000, 50_000] {
        let live: Vec<String> = (0..n).map(|i| format!("x.io/f{i}")).collect();
        let more: Vec<String> = (n..2 * n).map(|i| format!("x.io/f{i}")).collect();
        let target = json!({"metadata": {"name": "x", "finalizers": live}});
        let body = serde_json::to_vec(&json!({"metadata": {"finalizers": more}})).unwrap();
        let doc = patch::parse(PatchKind::StrategicMerge, &body).expect("patch");
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::from_parameter(n), &target, |b, target| {
            b.iter(|| {
                let mut v = target.clone();
                patch::apply(PatchKind::StrategicMerge, &doc, &mut v).expect("applies");
                v
            })
        });
    }
    g.finish();

    let mut g = c.benchmark_group("nested_yaml_refused");
    for n in [10_000, 100_000, 1_000_000] {
        let body = format!(
            "metadata: {{name: x}}\ninvolvedObject: {{}}\nx: {}{}\n",
            "[".repeat(n),
            "]".repeat(n)
        );
        g.throughput(Throughput::Bytes(body.len() as u64));
        g.bench_with_input(BenchmarkId::from_parameter(n), &body, |b, body| {
            b.iter(|| parse_yaml_object(body.as_bytes()).expect_err("too deep"))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
