//! The `process_*` metrics of Prometheus's process collector, which every Go program (etcd,
//! kube-apiserver) exports under these names, read from `/proc` at each scrape; plus the
//! connection budget's use (`keel_process_connections`, `keel_process_max_connections`).

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

use crate::{connections, fd_limit};

/// Reports the process's CPU, memory, file descriptors, start time and connections.
#[derive(Debug, Default)]
pub struct ProcessCollector;

/// What `/proc/self/stat` says of the process.
#[derive(Debug, Default, PartialEq)]
struct Stat {
    cpu_seconds: f64,
    virtual_bytes: f64,
    resident_bytes: f64,
    start_time_seconds: f64,
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        if let Some(stat) = read_stat() {
            let cpu = ConstCounter::new(stat.cpu_seconds);
            cpu.encode(encoder.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds.",
                None,
                cpu.metric_type(),
            )?)?;
            gauge(
                &mut encoder,
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
                stat.resident_bytes,
            )?;
            gauge(
                &mut encoder,
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes.",
                stat.virtual_bytes,
            )?;
            gauge(
                &mut encoder,
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds.",
                stat.start_time_seconds,
            )?;
        }
        if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
            gauge(
                &mut encoder,
                "process_open_fds",
                "Number of open file descriptors.",
                fds.count() as f64,
            )?;
        }
        gauge(
            &mut encoder,
            "process_max_fds",
            "Maximum number of open file descriptors.",
            fd_limit::current().soft as f64,
        )?;
        let budget = connections::budget();
        gauge(
            &mut encoder,
            "keel_process_connections",
            "Client connections open (HTTP/1.1 and HTTP/2, every listener of the process).",
            budget.open() as f64,
        )?;
        gauge(
            &mut encoder,
            "keel_process_max_connections",
            "The most client connections the process accepts at once (the open-file limit \
             less a reserve for its own files); past it new connections wait to be accepted.",
            budget.bound() as f64,
        )?;
        Ok(())
    }
}

fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: f64,
) -> Result<(), std::fmt::Error> {
    let gauge = ConstGauge::new(value);
    gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)
}

fn read_stat() -> Option<Stat> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let boot = std::fs::read_to_string("/proc/stat").ok()?;
    let boot_time = boot
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse::<f64>()
        .ok()?;
    parse_stat(
        &stat,
        boot_time,
        rustix::param::clock_ticks_per_second() as f64,
        rustix::param::page_size() as f64,
    )
}

/// Reads `/proc/PID/stat` (see proc(5)): the fields after the command's closing parenthesis,
/// of which utime and stime (14 and 15, in clock ticks), starttime (22, ticks after boot),
/// vsize (23, bytes) and rss (24, pages).
fn parse_stat(stat: &str, boot_time: f64, ticks: f64, page: f64) -> Option<Stat> {
    let fields: Vec<&str> = stat.get(stat.rfind(')')? + 2..)?.split(' ').collect();
    // `fields[0]` is field 3 (state).
    let field = |n: usize| fields.get(n - 3)?.parse::<f64>().ok();
    Some(Stat {
        cpu_seconds: (field(14)? + field(15)?) / ticks,
        start_time_seconds: boot_time + field(22)? / ticks,
        virtual_bytes: field(23)?,
        resident_bytes: field(24)? * page,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proc_stat_line_is_read_past_a_command_with_spaces_and_parentheses() {
        let line = "4242 (keel (up) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 \
                    9 0 1000 123456789 2048 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 \
                    0 0 0 0 0";
        let stat = parse_stat(line, 1_700_000_000.0, 100.0, 4096.0).unwrap();
        assert_eq!(
            stat,
            Stat {
                cpu_seconds: 3.0,
                start_time_seconds: 1_700_000_010.0,
                virtual_bytes: 123_456_789.0,
                resident_bytes: 2048.0 * 4096.0,
            }
        );
    }

    #[test]
    fn the_collector_reports_the_fd_metrics() {
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register_collector(Box::new(ProcessCollector));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for name in [
            "process_cpu_seconds_total ",
            "process_open_fds ",
            "process_max_fds ",
            "process_resident_memory_bytes ",
            "keel_process_max_connections ",
        ] {
            assert!(text.contains(name), "{name} missing from\n{text}");
        }
    }
}
