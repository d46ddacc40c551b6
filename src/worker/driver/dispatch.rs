//! Work handed to the compute workers: a unit's jobs dispatched, their outcomes taken back, a lost
//! compute worker's jobs sent again; and the compute worker's own side ([`ComputeWorker`]).

use super::*;

impl Driver {
    /// Pool mode: begins the next unit with numeric work and hands its jobs out (units without
    /// any are finished on the spot, for at most `budget_seconds`).
    pub(super) fn dispatch_unit(&mut self, generation: u64, budget_seconds: f64) -> Reaction {
        if self.in_flight.is_some() {
            return Reaction::default();
        }
        // Family fits on the GPU go in lockstep rounds, one request per fit: more of them per
        // unit than the compute workers would take keep the device busier.
        let width = if self.families_on_gpu() {
            self.workers().max(GPU_FAMILY_WIDTH)
        } else {
            self.workers()
        };
        let Some(session) = self.session.as_mut() else {
            return Reaction::default();
        };
        let started = now_seconds();
        loop {
            if session.is_finished() || !session.begin_unit(width) {
                return self.end_run();
            }
            let jobs: Vec<Job<'static>> = session
                .unit_jobs()
                .into_iter()
                .map(Job::into_owned)
                .collect();
            if jobs.is_empty() {
                session.finish_unit(Vec::new());
                if now_seconds() - started >= budget_seconds {
                    return Reaction {
                        messages: self.progress_if_due(),
                        step: Some(generation),
                        ..Reaction::default()
                    };
                }
                continue;
            }
            self.batch += 1;
            self.in_flight = Some(self.batch);
            return Reaction {
                dispatch: Some(Dispatch {
                    batch: self.batch,
                    data_id: self.data_id,
                    jobs,
                }),
                ..Reaction::default()
            };
        }
    }

    /// The outcomes of batch `batch` from the compute workers, in the jobs' order: finishes the
    /// unit, reports, and schedules the next unit unless the run is paused or over. Outcomes of
    /// a batch no longer wanted (the run was stopped or replaced) are dropped.
    pub fn outcomes(&mut self, batch: u64, outcomes: Vec<Outcome>) -> Reaction {
        self.outcomes_with_traffic(batch, outcomes, None)
    }

    /// [`Driver::outcomes`] of a batch the GPU computed whole, with what crossed to and from the
    /// device meanwhile (`traffic`), which the run's result counts as the CLI's does
    /// (`gpu.steady_state`).
    pub fn outcomes_with_traffic(
        &mut self,
        batch: u64,
        outcomes: Vec<Outcome>,
        traffic: Option<DeviceTraffic>,
    ) -> Reaction {
        if self.in_flight != Some(batch) {
            return Reaction::default();
        }
        self.in_flight = None;
        let Some(session) = self.session.as_mut() else {
            return Reaction::default();
        };
        if let Some(traffic) = traffic {
            session.count_device_traffic(traffic);
        }
        session.finish_unit(outcomes);
        // The probes placed the run's work: the badge says where (and why) once, before the
        // result when this unit was the last.
        let placed = !self.probing();
        let mut messages = Vec::new();
        if placed && !self.placements_told {
            self.placements_told = true;
            messages.push(self.backend_message(false));
        }
        if self.session.as_ref().is_some_and(Session::is_finished) {
            let mut end = self.end_run();
            messages.append(&mut end.messages);
            end.messages = messages;
            return end;
        }
        messages.extend(self.progress_if_due());
        messages.extend(self.save_if_due());
        Reaction {
            messages,
            step: (!self.paused).then_some(self.generation),
            ..Reaction::default()
        }
    }

    /// A compute worker died (or could not start) while batch `batch` was out: the unit is
    /// dropped and planned again on fresh workers. After [`MAX_POOL_LOSSES`] losses in one run
    /// the run goes on in this worker alone.
    pub fn compute_lost(&mut self, batch: u64, why: &str) -> Reaction {
        if self.in_flight != Some(batch) {
            return Reaction::default();
        }
        self.in_flight = None;
        let Some(session) = self.session.as_mut() else {
            return Reaction::default();
        };
        session.abandon_unit();
        self.losses += 1;
        let mut messages = Vec::new();
        if self.losses >= MAX_POOL_LOSSES {
            self.workers = 1;
            self.pool_given_up = true;
            messages.push(FromWorker::Compute {
                run_id: self.run_id,
                workers: 1,
            });
            web_log(&format!(
                "occam: {} compute workers lost ({why}); this worker computes alone now",
                self.losses
            ));
        }
        Reaction {
            messages,
            step: (!self.paused).then_some(self.generation),
            reset_pool: true,
            ..Reaction::default()
        }
    }
}

/// A compute worker's state: the data its jobs read. It answers each [`ToCompute`] message
/// ([`crate::worker::protocol::encode_compute`] bytes) with a [`FromCompute`] one, or nothing for data.
#[derive(Debug, Default)]
pub struct ComputeWorker {
    data: Option<(u64, DMatrix<f64>)>,
}

impl ComputeWorker {
    pub fn new() -> Self {
        Self::default()
    }

    /// Handles one message; the reply to post back, if any.
    pub fn handle(&mut self, bytes: &[u8]) -> Option<Vec<u8>> {
        let reply = match decode_compute::<ToCompute<'static>>(bytes) {
            Ok(ToCompute::Data {
                data_id,
                rows,
                cols,
                values,
            }) => {
                self.data = (values.len() == rows * cols)
                    .then(|| (data_id, DMatrix::from_column_slice(rows, cols, &values)));
                return None;
            }
            Ok(ToCompute::Jobs {
                batch,
                first,
                data_id,
                jobs,
            }) => match &self.data {
                Some((id, data)) if *id == data_id => FromCompute::Done {
                    batch,
                    first,
                    outcomes: jobs.iter().map(|job| job.run(data)).collect(),
                },
                _ => FromCompute::Refused {
                    batch,
                    first,
                    count: jobs.len(),
                    message: format!("no data {data_id} in this compute worker"),
                },
            },
            Err(message) => FromCompute::Refused {
                batch: 0,
                first: 0,
                count: 0,
                message,
            },
        };
        Some(encode_compute(&reply))
    }
}

/// The message a compute worker needs before jobs on `data`.
pub fn data_message(data_id: u64, data: &DMatrix<f64>) -> Vec<u8> {
    encode_compute(&ToCompute::Data {
        data_id,
        rows: data.nrows(),
        cols: data.ncols(),
        values: std::borrow::Cow::Borrowed(data.as_slice()),
    })
}

/// The message running jobs `range` of `dispatch`.
pub fn jobs_message(dispatch: &Dispatch, range: std::ops::Range<usize>) -> Vec<u8> {
    encode_compute(&ToCompute::Jobs {
        batch: dispatch.batch,
        first: range.start,
        data_id: dispatch.data_id,
        jobs: dispatch.jobs[range].to_vec(),
    })
}

/// Jobs per message when `jobs` go to `workers` workers: about two messages per worker, so the
/// workers balance while few messages travel.
pub fn jobs_per_message(jobs: usize, workers: usize) -> usize {
    jobs.div_ceil(2 * workers.max(1)).max(1)
}

/// Reads a compute worker's reply: the batch, the first job's index and one outcome per job. A
/// refusal (the worker lacked the data, or could not read the jobs) or an unreadable reply is an
/// error: the jobs did not run, so the unit is to be planned again, not failed.
pub fn read_reply(bytes: &[u8]) -> Result<(u64, usize, Vec<Outcome>), String> {
    match decode_compute::<FromCompute>(bytes)? {
        FromCompute::Done {
            batch,
            first,
            outcomes,
        } => Ok((batch, first, outcomes)),
        FromCompute::Refused { message, .. } => Err(message),
    }
}
