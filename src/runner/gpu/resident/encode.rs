//! Recording a submission: the batched factorisations, every batch's passes in order, and the
//! requests prepared for them.

use super::*;
use crate::runner::gpu::Upload;

impl Gpu {
    /// Records `jobs` (all of one kind: `what` is "kzz" for K_ZZ's factorisation, else the
    /// natural step) as few batches of `cholesky.wgsl`'s passes as their shapes allow: the jobs
    /// with the same M and the same uniform constant (the jitter floor, or γ) go in one batch
    /// (`cholesky::factor_passes`: every pass over all of the batch's matrices, the
    /// factorisation blocked), their inputs copied into the batch's buffer and their outputs copied back, in as
    /// many pieces as the storage binding's limit needs.
    pub(super) fn record_batched(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        what: &'static str,
        jobs: &[BatchedFactor],
    ) -> Result<(), GpuError> {
        let natural = what != "kzz";
        let job = if natural {
            FactorJob::NaturalStep
        } else {
            FactorJob::Factor
        };
        let mut groups: Vec<(usize, u64, Vec<usize>)> = Vec::new();
        for (k, job) in jobs.iter().enumerate() {
            let key = (job.m, job.constant.to_bits());
            match groups.iter_mut().find(|(m, c, _)| (*m, *c) == key) {
                Some(group) => group.2.push(k),
                None => groups.push((key.0, key.1, vec![k])),
            }
        }
        let limit = self.device.setup().limits().max_storage_buffer_binding_size;
        let mut batch = 0;
        for (m, constant, members) in groups {
            let (in_bytes, out_bytes) = if natural {
                (2 * (2 * m * m + 2 * m) * 4, step_words(m) * 4)
            } else {
                (2 * m * m * 4, output_words(m) * 4)
            };
            let per_dispatch = (limit / out_bytes.max(1) as u64).clamp(1, 65_535) as usize;
            for piece in members.chunks(per_dispatch) {
                let slot = RESIDENT_BATCH + batch;
                batch += 1;
                let n = piece.len();
                let (label_in, label_out, label_dims, label_ladder) = if natural {
                    (
                        "natural batch in",
                        "natural batch out",
                        "natural batch dims",
                        "natural batch ladder",
                    )
                } else {
                    (
                        "kzz batch in",
                        "kzz batch out",
                        "kzz batch dims",
                        "kzz batch ladder",
                    )
                };
                // Jobs that already lie one after another from the start of one buffer (a
                // group's K_ZZ and its factors, its natural steps' inputs) are bound there;
                // others are copied into the batch's own buffers and out of them.
                let in_place = |place: fn(&BatchedFactor) -> (&wgpu::Buffer, u64), bytes: usize| {
                    let (first, _) = place(&jobs[piece[0]]);
                    piece.iter().enumerate().all(|(i, &k)| {
                        let (buffer, at) = place(&jobs[k]);
                        buffer == first && at == (i * bytes) as u64
                    })
                };
                let input_in_place = in_place(|j| (&j.input, j.input_at), in_bytes);
                let output_in_place = in_place(|j| (&j.output, j.output_at), out_bytes);
                let input = if input_in_place {
                    jobs[piece[0]].input.clone()
                } else {
                    self.resident(label_in, slot, n * in_bytes, storage())
                };
                let output = if output_in_place {
                    jobs[piece[0]].output.clone()
                } else {
                    self.resident(label_out, slot, n * out_bytes, storage())
                };
                self.check_binding("a batch of factorisations", (n * out_bytes) as u64)?;
                let constant = f64::from_bits(constant);
                let (gamma, floor) = if natural {
                    (constant, 0.0)
                } else {
                    (0.0, constant)
                };
                let dims = self.resident_written(
                    Upload::OnChange,
                    label_dims,
                    slot,
                    &dims_bytes(m, n, job, gamma, floor),
                    wgpu::BufferUsages::UNIFORM,
                );
                let ladder: Vec<u8> = piece.iter().flat_map(|&k| jobs[k].ladder.clone()).collect();
                let ladder =
                    self.resident_written(Upload::OnChange, label_ladder, slot, &ladder, storage());
                for (i, &k) in piece.iter().enumerate().filter(|_| !input_in_place) {
                    let bytes = in_bytes as u64;
                    if bytes > 0 {
                        self.device.copy(
                            encoder,
                            (&jobs[k].input, jobs[k].input_at),
                            (&input, i as u64 * bytes),
                            bytes,
                        );
                    }
                }
                let bound = vec![dims, input, ladder, output.clone()];
                let passes = factor_passes(&self.pipelines.cholesky, job, m, n);
                for (_, groups) in &passes {
                    self.check_groups("a batch of factorisations", *groups)?;
                }
                let steps: Vec<Step> = passes
                    .into_iter()
                    .map(|(pipeline, groups)| (pipeline, bound.clone(), groups))
                    .collect();
                self.record_steps(encoder, what, slot, &steps.iter().collect::<Vec<_>>());
                for (i, &k) in piece.iter().enumerate().filter(|_| !output_in_place) {
                    let bytes = out_bytes as u64;
                    if bytes > 0 {
                        self.device.copy(
                            encoder,
                            (&output, i as u64 * bytes),
                            (&jobs[k].output, jobs[k].output_at),
                            bytes,
                        );
                    }
                }
            }
        }
        Ok(())
    }

    /// Prepares every request ([`Gpu::prepare_resident`]), puts those whose passes can run as
    /// one in batches ([`SlotHeld::groups_with`]; as many per batch as the storage binding's
    /// limit allows) and plans each batch's predictions ([`Gpu::plan_predictions`]), gather and
    /// held passes ([`Gpu::plan_held`]) over its slots, with Z copied from each request's held
    /// state into the batch's buffers.
    pub(super) fn encode_batches<'g>(
        &'g self,
        encoder: &mut wgpu::CommandEncoder,
        requests: &[ResidentRequest],
    ) -> Result<(Vec<Encoded>, Vec<Batch<'g>>), GpuError> {
        // One read-back buffer for the submission, the requests' values one after another (so
        // that one mapping reads them all, and no more), made with room for every request's
        // states whether or not they are read this time (so that it is made once).
        let room: usize = requests.iter().map(|r| readback_room(r, true)).sum();
        let readback = self.resident(
            "resident readback",
            RESIDENT_SCRATCH,
            room * 4,
            wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        );
        let mut first = 0;
        let mut prepared = Vec::with_capacity(requests.len());
        for (position, request) in requests.iter().enumerate() {
            prepared.push(self.prepare_resident(encoder, position, request, (&readback, first))?);
            first += readback_room(request, request.read_current) * 4;
        }
        let limit = self.device.setup().limits().max_storage_buffer_binding_size;
        // Each batch's first member, in order of appearance; then its members.
        let mut leaders: Vec<usize> = Vec::new();
        for (k, p) in prepared.iter().enumerate() {
            if !leaders
                .iter()
                .any(|&l| prepared[l].held.groups_with(&p.held))
            {
                leaders.push(k);
            }
        }
        let mut pieces: Vec<Vec<usize>> = Vec::new();
        for leader in leaders {
            let members: Vec<usize> = (0..prepared.len())
                .filter(|&k| prepared[leader].held.groups_with(&prepared[k].held))
                .collect();
            let first = &prepared[leader];
            let (z, m, t) = (first.held.sizes, first.shape.m, first.t);
            let layout = first.pending.layout;
            // The largest of a slot's shares of the batch's buffers and of its M × M group's.
            let largest = [
                3 * z.held,
                z.gradients,
                z.finished,
                z.points,
                m * (t + m),
                layout.chunks * m * layout.width,
                state_words(m),
                output_words(m),
                2 * (2 * m * m + 2 * m),
            ]
            .into_iter()
            .max()
            .unwrap_or(1);
            let capacity = (limit / (largest.max(1) * 4) as u64).max(1) as usize;
            pieces.extend(members.chunks(capacity).map(<[usize]>::to_vec));
        }
        let mut encoded: Vec<Option<Encoded>> = (0..requests.len()).map(|_| None).collect();
        let mut batches = Vec::with_capacity(pieces.len());
        for (g, members) in pieces.iter().enumerate() {
            let slot = RESIDENT_HELD + g;
            let first = &requests[members[0]];
            let m = first.z.nrows();
            let n = members.len();
            let square = |role| self.resident(role, slot, (n * m * m).max(1) * 4, storage());
            // The predictions' operands, narrowed into them by the batch's M × M passes
            // (`plan_group`).
            let operands = InducingOperands {
                l_inv: square("l_inv (f32)"),
                s_minus_i: square("s - i (f32)"),
                q_mean: self.resident("m and alpha (f32)", slot, (2 * n * m).max(1) * 4, storage()),
            };
            let inputs: Vec<PointInputs> = members
                .iter()
                .map(|&k| {
                    let r = &requests[k];
                    // Z and the hyperparameters are the slot's, held on the device.
                    PointInputs {
                        upload_z: false,
                        latent_on_device: r.encoder.is_some(),
                        rows_on_device: r.rows.is_some(),
                        parameters_on_device: true,
                        ..PointInputs::uploaded(r.kernel, r.z, r.x, r.y, r.latent, r.noise, r.c)
                    }
                })
                .collect();
            // The held passes read Adam's step size and φ²'s floor beside each slot's latent
            // column.
            let rates: Vec<[u32; 2]> = members
                .iter()
                .map(|&k| {
                    let floor = requests[k].parameters.noise_floor as f32;
                    [prepared[k].held.rate.to_bits(), floor.to_bits()]
                })
                .collect();
            let plan = self.plan_predictions(slot, &inputs, &rates, &operands, true)?;
            let strides = plan.strides;
            let gather = match members
                .iter()
                .map(|&k| requests[k].rows)
                .collect::<Option<Vec<&[usize]>>>()
            {
                Some(rows) => {
                    self.plan_gather(slot, &rows, [&plan.x, &plan.y, &plan.slot_words])?
                }
                None => Vec::new(),
            };
            let bytes = |words: usize| (words * 4) as u64;
            for (place, &k) in members.iter().enumerate() {
                let p = &prepared[k];
                let request = &requests[k];
                debug_assert_eq!(
                    derived_noise_at(request.kernel),
                    derived_noise_at(first.kernel),
                    "one kernel structure per batch"
                );
                // Z comes from the slot's current held state, not from the host: into the
                // points after the slot's T (the kernel reads the last M points as Z).
                let z_words = strides.z;
                if z_words > 0 {
                    let (points, at) = plan.z_place(place);
                    self.device
                        .copy(encoder, (&p.z_current, 0), (points, at), bytes(z_words));
                }
                encoded[k] = Some(Encoded {
                    pending: p.pending.clone(),
                    algebra: SlotAlgebra {
                        m,
                        current: p.current.clone(),
                        relative_jitter: request.relative_jitter,
                        ladder: ladder_bytes(request.jitter, 1),
                        gamma: request.gamma,
                        next: p.next.clone(),
                        readback: p.pending.readback.clone(),
                        status_at: p.status_at,
                        kl_at: p.kl_at,
                    },
                    copies: p.copies.clone(),
                });
            }
            let held: Vec<&SlotHeld> = members.iter().map(|&k| &prepared[k].held).collect();
            let held = self.plan_held(slot, &held, &plan)?;
            debug_assert_eq!(
                strides.operands,
                [m * m, m * m, 2 * m],
                "the M × M passes read the operands"
            );
            debug_assert_eq!(
                [strides.p, strides.g_alpha_ky],
                [2 * m * m, 4 * m],
                "and the products' planes at these strides"
            );
            let shares = BatchShares {
                t: first.latent.eps.len(),
                k: plan.k.clone(),
                k_stride: strides.k,
                p: plan.p.clone(),
                g_alpha_ky: plan.g_alpha_ky.clone(),
                params: plan.params.clone(),
                params_stride: strides.params,
                noise_at: derived_noise_at(first.kernel) as usize / 4,
                operands,
            };
            batches.push(Batch {
                slot,
                gather,
                front: plan.front,
                middle: plan.middle,
                adjoint: plan.back,
                held,
                members: members.clone(),
                shares,
            });
        }
        let encoded = encoded
            .into_iter()
            .map(|e| e.expect("every request is in a batch"))
            .collect();
        Ok((encoded, batches))
    }

    /// Records one request's state change and the host's hyperparameters (when it changed
    /// them) into `encoder`, and lays out its read-back ([`Prepared`]).
    pub(super) fn prepare_resident(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        position: usize,
        request: &ResidentRequest,
        (readback, first): (&wgpu::Buffer, usize),
    ) -> Result<Prepared, GpuError> {
        let state_slot = RESIDENT_SLOTS + request.slot;
        let slot = RESIDENT_SCRATCH + position;
        let (m, d) = request.z.shape();
        let shape = StateShape::of(request.z, request.encoder, request.kernel);
        assert_eq!(
            request.parameters.extra.len() + 1,
            shape.parameters,
            "one graph gradient per kernel hyperparameter"
        );
        let (samples, rows) = request.latent.eps.shape();
        let t = samples * rows;
        let mm = m * m;
        for (what, values) in [
            ("q(v)'s state", state_words(m)),
            ("K_ZZ's factor", output_words(m)),
            ("the natural step's inputs", 2 * (2 * mm + 2 * m)),
        ] {
            self.check_binding(what, (values * 4) as u64)?;
        }
        let square_groups = ((mm.max(1) as u32).div_ceil(GROUP), 1, 1);
        self.check_groups("the M × M passes", square_groups)?;
        self.record_change(encoder, state_slot, shape, request.before);
        let words = state_words(m) * 4;
        let current = self.resident("q current", state_slot, words, storage());
        let next = self.resident("q next", state_slot, words, storage());
        let z_words = held_words(shape) * 4;
        self.check_binding("the held state", z_words as u64)?;
        let z_current = self.resident("held current", state_slot, z_words, storage());
        let z_next = self.resident("held next", state_slot, z_words, storage());
        // The host's hyperparameters, when it changed them, over the current ones (after the
        // state change, so that a commit does not bring the device's back). The buffer is made
        // with the first request, so that a later upload creates nothing.
        let k = shape.parameters;
        let upload = self.resident("parameters upload", slot, 3 * k * 4, storage());
        if let Some(host) = request.parameters.upload {
            assert!(
                [host.values.len(), host.first.len(), host.second.len()] == [k; 3],
                "the host's hyperparameters and moments"
            );
            let values = host.values.iter().chain(&host.first).chain(&host.second);
            self.device
                .write_buffer(&upload, 0, &super::super::f32_bytes(values.copied()));
            for third in 0..3 {
                self.device.copy(
                    encoder,
                    (&upload, (third * k * 4) as u64),
                    (
                        &z_current,
                        ((third * shape.held() + shape.parameters_at()) * 4) as u64,
                    ),
                    (k * 4) as u64,
                );
            }
        }

        // The predictions' shapes (their passes run over the request's batch: `encode_batches`).
        let kernel = request.kernel;
        let points = t + m;
        let chunk = backward_chunk(points);
        let layout = ReadbackLayout {
            m,
            t,
            chunks: points.div_ceil(chunk),
            width: backward_width(kernel),
        };
        let [c_hi, c_lo] = super::super::cholesky::two_words(request.c);
        let room = gradient_room(&layout, rows, shape);
        // `held_gradients.wgsl`'s Dims but for its strides (each pass's own, `plan_held`).
        let dims_words = [
            m as u32,
            layout.width as u32,
            t as u32,
            d as u32,
            samples as u32,
            // The latent column is the slot's own (the predictions' slot words), so requests of
            // one shape share these words.
            0,
            0,
            1.0f32.to_bits(),
            0,
            (request.adam.beta1 as f32).to_bits(),
            (request.adam.beta2 as f32).to_bits(),
            (request.adam.epsilon as f32).to_bits(),
            ((1.0 - request.adam.beta1) as f32).to_bits(),
            ((1.0 - request.adam.beta2) as f32).to_bits(),
            shape.encoder as u32,
            shape.parameters as u32,
            kernel.stationary.len() as u32,
            u32::from(kernel.linear.is_some()),
            // φ²'s floor is the slot's own (the predictions' slot words).
            0,
            c_hi.to_bits(),
            c_lo.to_bits(),
            derived_words(kernel) as u32,
            0,
            0,
        ];

        let parts = readback_words(shape, rows, request.read_current);
        let total: usize = parts.iter().sum();
        // (source, its first word, words) of each piece, in the parts' order: the gradients'
        // head, K_ZZ's status and the KL terms come from the groups' buffers (`plan_held`,
        // `plan_group`); the stepped hyperparameters are a piece of each third of the next held
        // state.
        let at = state_offsets(m);
        let mut pieces: Vec<(Option<(&wgpu::Buffer, usize)>, usize)> = vec![
            (None, parts[0]),
            (None, parts[1]),
            (Some((&next, 2 * at.status)), parts[2]),
            (None, parts[3]),
        ];
        pieces.extend((0..3).map(|third| {
            let first = third * shape.held() + shape.parameters_at();
            (Some((&z_next, first)), k)
        }));
        pieces.extend([
            (Some((&current, 0)), parts[5]),
            (Some((&z_current, 0)), parts[6]),
        ]);
        let mut offset = first as u64;
        let mut copies = Vec::new();
        let mut group_pieces = Vec::new();
        for (piece, words) in pieces {
            let bytes = (words * 4) as u64;
            match piece {
                Some((source, first)) if bytes > 0 => {
                    copies.push((source.clone(), (first * 4) as u64, offset, bytes))
                }
                Some(_) => {}
                None => group_pieces.push(offset),
            }
            offset += bytes;
        }
        let held = SlotHeld {
            dims: dims_words,
            encoder: request
                .encoder
                .map(|e| (encoder_shapes(e), request.c * samples as f64)),
            table: parameter_table(kernel),
            extra: super::super::f32_bytes(request.parameters.extra.iter().copied()),
            rate: request.adam.rate as f32,
            sizes: HeldSizes {
                held: shape.held(),
                rows,
                x: rows * d,
                latent: t + 2 * rows,
                gradients: room,
                finished: layout.parts()[2],
                points: points * d,
                derived: derived_words(kernel),
                weights_at: m * d,
                encoder: shape.encoder,
                width: layout.width,
                latent_at: HEADER_WORDS,
                gradient_at: room - shape.held() + m * d,
            },
            kinds: kind_bytes(kernel),
            gathered: request.rows.is_some(),
            current: z_current.clone(),
            next: z_next,
            readback: (readback.clone(), group_pieces[0], (parts[0] * 4) as u64),
        };
        Ok(Prepared {
            pending: Pending {
                layout,
                readback: readback.clone(),
                first,
                words: total,
            },
            shape,
            t,
            current,
            next,
            z_current,
            held,
            status_at: group_pieces[1],
            kl_at: group_pieces[2],
            copies,
        })
    }
}
