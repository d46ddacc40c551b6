//! Planning a submission's passes: the held passes per shape of requests and the M × M algebra
//! per group of requests of one M.

use super::*;
use crate::runner::gpu::Upload;

impl Gpu {
    /// The held passes of a batch (`members`, all of one [`SlotHeld::groups_with`] another) in
    /// its scratch slot `slot`: `held_gradients.wgsl`'s and `encoder.wgsl`'s passes each one
    /// dispatch over the batch, on the batch's prediction buffers (`plan`: the rows, the latent
    /// input, the finished sums, ∂U, the points, the derived parameters and the slots' words)
    /// and the group's held states, with each request's held state copied in and its next held
    /// state and gradients' head copied out.
    pub(super) fn plan_held<'g>(
        &'g self,
        slot: usize,
        members: &[&SlotHeld],
        plan: &PredictionPlan<'g>,
    ) -> Result<GroupHeld<'g>, GpuError> {
        let first = members[0];
        let z = first.sizes;
        let n = members.len();
        let strides = plan.strides;
        debug_assert_eq!(
            [z.x, z.latent, z.finished, z.points, z.derived],
            [
                strides.x,
                strides.latent,
                strides.finished,
                strides.points,
                strides.params
            ],
            "the held passes read the predictions' buffers at their strides"
        );
        let buffer = |role, per_slot: usize| {
            self.check_binding("the held passes' buffers", (n * per_slot * 4) as u64)?;
            Ok::<_, GpuError>(self.resident(role, slot, (n * per_slot).max(1) * 4, storage()))
        };
        let current = buffer("held group current", 3 * z.held)?;
        let next = buffer("held group next", 3 * z.held)?;
        let gradients = buffer("held group gradients", z.gradients)?;
        let (x, latent, finished) = (&plan.x, &plan.latent, &plan.finished);
        let (cols, points, derived, steps) =
            (&plan.cols, &plan.points, &plan.params, &plan.slot_words);
        let spare = self.resident("held group spare", slot, 4, storage());
        let concat = |part: fn(&SlotHeld) -> &[u8]| -> Vec<u8> {
            members.iter().flat_map(|h| part(h).to_vec()).collect()
        };
        let table = self.resident_written(
            Upload::OnChange,
            "held group table",
            slot,
            &concat(|h| &h.table),
            storage(),
        );
        let extra = self.resident_written(
            Upload::OnChange,
            "held group extra",
            slot,
            &concat(|h| &h.extra),
            storage(),
        );
        let (table_w, extra_w) = (first.table.len() / 4, first.extra.len() / 4);
        let dims = |role: &'static str, strides: [usize; 4]| {
            let mut words = first.dims.to_vec();
            words.extend(strides.map(|w| w as u32));
            self.resident_written(
                Upload::OnChange,
                role,
                slot,
                &super::super::uniform_words(&words),
                wgpu::BufferUsages::UNIFORM,
            )
        };
        // A held pass over `buffers` with its dims block (`role`, the buffers' `strides`).
        let pass = |pass: HeldPass,
                    role: &'static str,
                    strides: [usize; 4],
                    buffers: [&wgpu::Buffer; 5],
                    groups: (u32, u32, u32)|
         -> Result<Step<'g>, GpuError> {
            self.check_groups("the held passes", groups)?;
            let dims = dims(role, strides);
            Ok((
                &self.pipelines.held_gradients[pass as usize],
                std::iter::once(&dims)
                    .chain(buffers)
                    .chain([steps])
                    .cloned()
                    .collect(),
                groups,
            ))
        };
        let slots = n as u32;
        let one = (1, slots, 1);
        let d = first.dims[3] as usize;
        let m = first.dims[0] as usize;
        let inputs_groups = (
            ((m * d).max(z.rows).max(2) as u32).div_ceil(GROUP),
            slots,
            1,
        );
        let held_groups = ((z.held.max(1) as u32).div_ceil(GROUP), slots, 1);
        // The W kernel sums, the squared gradient of Z and the encoder, Σ KL(q(w)) and the
        // points' D column sums of squares.
        let sums_groups = ((z.width + 2 + d) as u32, slots, 1);
        let derive = vec![pass(
            HeldPass::DeriveParameters,
            "held dims: derive",
            [3 * z.held, table_w, 0, z.derived],
            [&current, &table, &spare, derived, &spare],
            one,
        )?];
        let encoder = match &first.encoder {
            Some((shapes, scale)) => Some(self.plan_encoder(
                slot,
                shapes,
                z.rows,
                first.dims[2] as usize,
                *scale,
                &EncoderBuffers {
                    held: &current,
                    held_stride: 3 * z.held,
                    weights_at: z.weights_at,
                    x,
                    x_stride: z.x,
                    latent,
                    latent_stride: z.latent,
                    gradients: &gradients,
                    gradients_stride: z.gradients,
                    latent_at: z.latent_at,
                    gradient_at: z.gradient_at,
                },
                n,
            )?),
            None => None,
        };
        let (forward, backward) = match encoder {
            Some(plan) => (plan.forward, plan.backward),
            None => (Vec::new(), Vec::new()),
        };
        let finishing: Vec<Step> = std::iter::once(pass(
            HeldPass::InputGradients,
            "held dims: inputs",
            [z.finished, z.points, z.latent, z.gradients],
            [finished, cols, latent, &gradients, derived],
            inputs_groups,
        )?)
        .chain(backward)
        .chain([
            pass(
                HeldPass::KernelSums,
                "held dims: sums",
                [z.finished, z.latent, z.points, z.gradients],
                [finished, latent, points, &gradients, derived],
                sums_groups,
            )?,
            pass(
                HeldPass::ParameterGradients,
                "held dims: parameters",
                [3 * z.held, table_w, extra_w, z.gradients],
                [&current, &table, &extra, &gradients, derived],
                one,
            )?,
            pass(
                HeldPass::AdamHeld,
                "held dims: adam",
                [3 * z.held, z.gradients, 0, 3 * z.held],
                [&current, &gradients, &spare, &next, derived],
                held_groups,
            )?,
        ])
        .collect();
        let bytes = |words: usize| (words * 4) as u64;
        let mut group = GroupHeld {
            derive_in: Vec::new(),
            derive,
            forward,
            finishing,
            finishing_out: Vec::new(),
        };
        for (k, h) in members.iter().enumerate() {
            let at = |per_slot: usize| bytes(k * per_slot);
            group.derive_in.push((
                h.current.clone(),
                0,
                current.clone(),
                at(3 * z.held),
                bytes(3 * z.held),
            ));
            let (readback, offset, length) = &h.readback;
            group.finishing_out.extend([
                (
                    next.clone(),
                    at(3 * z.held),
                    h.next.clone(),
                    0,
                    bytes(3 * z.held),
                ),
                (
                    gradients.clone(),
                    at(z.gradients),
                    readback.clone(),
                    *offset,
                    *length,
                ),
            ]);
        }
        Ok(group)
    }

    /// Plans the M × M algebra of each batch (`inducing.wgsl`: each pass one dispatch over the
    /// batch's slots, the dispatch's y the slot; the products a batch of the GEMM), reading K_ZZ,
    /// P, [Ãg, Ãy] and the noise constants from the batch's buffers and writing the operands and
    /// K̄_ZZ into them; q(v)'s states copied into the group's buffers.
    pub(super) fn plan_algebra<'g>(
        &'g self,
        encoded: &[Encoded],
        batches: &[Batch],
    ) -> Result<Vec<GroupAlgebra<'g>>, GpuError> {
        batches
            .iter()
            .enumerate()
            .map(|(g, batch)| {
                let members: Vec<&SlotAlgebra> =
                    batch.members.iter().map(|&k| &encoded[k].algebra).collect();
                let m = members[0].m;
                self.plan_group(RESIDENT_GROUP + g, m, &members, &batch.shares)
            })
            .collect()
    }

    /// One batch's M × M buffers, passes and copies ([`GroupAlgebra`]) for `members` (all of
    /// size M = `m`), in group scratch slot `slot`, on the batch's `shares`.
    pub(super) fn plan_group<'g>(
        &'g self,
        slot: usize,
        m: usize,
        members: &[&SlotAlgebra],
        shares: &BatchShares,
    ) -> Result<GroupAlgebra<'g>, GpuError> {
        let n = members.len();
        let mm = m * m;
        let at = state_offsets(m);
        let words = |per_slot: usize| n * per_slot;
        for (what, values) in [
            ("q(v)'s states", words(state_words(m))),
            ("K_ZZ's factors", words(output_words(m))),
            ("the natural steps' inputs", words(2 * (2 * mm + 2 * m))),
        ] {
            self.check_binding(what, (values * 4) as u64)?;
        }
        let square_groups = ((mm.max(1) as u32).div_ceil(GROUP), n as u32, 1);
        let vector_groups = ((m.max(1) as u32).div_ceil(GROUP), n as u32, 1);
        self.check_groups("the M × M passes", square_groups)?;
        let buffer =
            |role, per_slot: usize| self.resident(role, slot, words(per_slot) * 4, storage());
        let state = buffer("group q(v)", state_words(m));
        let gram_in = buffer("group kzz (df)", 2 * mm);
        let kzz = buffer("group kzz factor", output_words(m));
        let l_f = buffer("group l (f32)", mm);
        // The batch's: K', the operands, the products' planes and the derived parameters.
        let BatchShares {
            t,
            k,
            k_stride,
            p,
            g_alpha_ky,
            params: noise,
            params_stride,
            noise_at,
            operands:
                InducingOperands {
                    l_inv,
                    s_minus_i,
                    q_mean,
                },
        } = shares;
        let (t, k_stride) = (*t, *k_stride);
        let (w_a, w_b, p_full) = (
            buffer("group w a", mm),
            buffer("group w b", mm),
            buffer("group p full", mm),
        );
        let natural_in = buffer("group natural step inputs", 2 * (2 * mm + 2 * m));
        let kl = buffer("group kl terms", 6);
        let spare = self.resident("group spare", slot, 4, storage());

        // inducing.wgsl's Dims: M, K_ZZ's column offset, the source's offset, the flags, and
        // each binding's words per slot.
        let dims =
            |role: &'static str, t: usize, offset: usize, flags: u32, strides: [usize; 4]| {
                let [a, b, c, d] = strides.map(|w| w as u32);
                self.resident_written(
                    Upload::OnChange,
                    role,
                    slot,
                    &super::super::uniform_words(&[
                        m as u32,
                        t as u32,
                        offset as u32,
                        flags,
                        a,
                        b,
                        c,
                        d,
                        1.0f32.to_bits(),
                        *noise_at as u32,
                        *params_stride as u32,
                        0,
                    ]),
                    wgpu::BufferUsages::UNIFORM,
                )
            };
        let glue = |which: Glue, dims: wgpu::Buffer, buffers: [&wgpu::Buffer; 4], groups| {
            let bound: Vec<wgpu::Buffer> = std::iter::once(dims)
                .chain(buffers.iter().map(|&b| b.clone()))
                .chain([noise.clone()])
                .collect();
            (&self.pipelines.inducing[which as usize], bound, groups)
        };
        let (state_w, factor_w) = (state_words(m), output_words(m));
        let widen = vec![glue(
            Glue::WidenGram,
            dims("glue: widen", t, 0, 0, [k_stride, 0, 0, 2 * mm]),
            [k, &spare, &spare, &gram_in],
            square_groups,
        )];
        let before = vec![
            glue(
                Glue::NarrowMatrix,
                dims("glue: l", 0, 0, 0, [factor_w, 0, 0, mm]),
                [&kzz, &spare, &spare, &l_f],
                square_groups,
            ),
            glue(
                Glue::NarrowMatrix,
                dims("glue: l_inv", 0, mm, 0, [factor_w, 0, 0, mm]),
                [&kzz, &spare, &spare, l_inv],
                square_groups,
            ),
            glue(
                Glue::NarrowMatrix,
                dims("glue: s - i", 0, at.s, 1, [state_w, 0, 0, mm]),
                [&state, &spare, &spare, s_minus_i],
                square_groups,
            ),
            glue(
                Glue::MeanAlpha,
                dims("glue: m", 0, at.mean, 0, [state_w, factor_w, 0, 2 * m]),
                [&state, &kzz, &spare, q_mean],
                vector_groups,
            ),
        ];
        // L̄, the Cholesky adjoint, K̄_ZZ (products a batch of the group's M × M matrices).
        let product = |(op_a, op_b): (super::super::Op, super::super::Op)| {
            super::super::gemm::Product::new(
                (m, m, m),
                op_a,
                op_b,
                false,
                n,
                super::super::Accumulation::Single,
            )
        };
        use super::super::Op::{AsIs, Transposed};
        let as_is = product((AsIs, AsIs));
        let t_as_is = product((Transposed, AsIs));
        for groups in [as_is.groups, as_is.sum_groups()] {
            self.check_groups("the M × M products", groups)?;
        }
        let uniform = wgpu::BufferUsages::UNIFORM;
        let as_is_dims =
            self.resident_written(Upload::OnChange, "m x m dims", slot, &as_is.dims, uniform);
        let t_as_is_dims = self.resident_written(
            Upload::OnChange,
            "m' x m dims",
            slot,
            &t_as_is.dims,
            uniform,
        );
        // At large M the products' 64 × 64 blocks are too few for a large GPU: split along the
        // inner dimension (one buffer of partial planes for all five, used in turn).
        let square_parts = as_is.reduced().then(|| {
            (
                self.resident(
                    "m x m partial sums",
                    slot,
                    as_is.output_words() * 4,
                    storage(),
                ),
                self.resident_written(
                    Upload::OnChange,
                    "m x m split sums",
                    slot,
                    &as_is.sum_dims(),
                    uniform,
                ),
            )
        });
        let gemm = |dims: &wgpu::Buffer, a: &wgpu::Buffer, b: &wgpu::Buffer, c: &wgpu::Buffer| {
            as_is.steps(
                &self.pipelines,
                dims,
                [a, b, c],
                square_parts.as_ref().map(|(p, s)| (p, s)),
            )
        };
        let after: Vec<Step> = [
            vec![glue(
                Glue::MirrorP,
                dims("glue: p", 0, 0, 0, [2 * mm, 0, 0, mm]),
                [p, &spare, &spare, &p_full],
                square_groups,
            )],
            gemm(&as_is_dims, s_minus_i, &p_full, &w_a),
            gemm(&t_as_is_dims, l_inv, &w_a, &w_b),
            vec![glue(
                Glue::LBar,
                dims("glue: l bar", 0, 0, 0, [2 * m, 4 * m, mm, mm]),
                [q_mean, g_alpha_ky, &w_b, &w_a],
                square_groups,
            )],
            gemm(&t_as_is_dims, &l_f, &w_a, &w_b),
            vec![glue(
                Glue::Phi,
                dims("glue: phi", 0, 0, 0, [0, 0, 0, mm]),
                [&spare, &spare, &spare, &w_b],
                square_groups,
            )],
            gemm(&as_is_dims, &w_b, l_inv, &w_a),
            gemm(&t_as_is_dims, l_inv, &w_a, &w_b),
            vec![glue(
                Glue::SymmetriseInto,
                dims("glue: k bar", t, 0, 0, [mm, 0, 0, k_stride]),
                [&w_b, &spare, &spare, k],
                square_groups,
            )],
        ]
        .into_iter()
        .flatten()
        .collect();
        let natural_inputs = vec![glue(
            Glue::NaturalInputs,
            dims(
                "glue: natural inputs",
                0,
                at.p,
                0,
                [state_w, 2 * mm, 4 * m, 2 * (2 * mm + 2 * m)],
            ),
            [&state, p, g_alpha_ky, &natural_in],
            square_groups,
        )];
        let kl_terms = vec![glue(
            Glue::KlTerms,
            dims("glue: kl", 0, 0, 0, [state_w, 0, 0, 6]),
            [&state, &spare, &spare, &kl],
            (1, n as u32, 1),
        )];

        // Each member's share of the group's buffers, at its place z.
        let bytes = |words: usize| (words * 4) as u64;
        let share = |z: usize, per_slot: usize| bytes(z * per_slot);
        let mut group = GroupAlgebra {
            slot,
            copies_in: Vec::new(),
            widen,
            factors: Vec::new(),
            before,
            after,
            natural_inputs,
            naturals: Vec::new(),
            kl_terms,
            readback: Vec::new(),
        };
        for (z, a) in members.iter().enumerate() {
            group.copies_in.push((
                a.current.clone(),
                0,
                state.clone(),
                share(z, state_w),
                bytes(state_w),
            ));
            group.factors.push(BatchedFactor {
                m,
                constant: a.relative_jitter,
                ladder: a.ladder.clone(),
                input: gram_in.clone(),
                input_at: share(z, 2 * mm),
                output: kzz.clone(),
                output_at: share(z, factor_w),
            });
            group.naturals.push(BatchedFactor {
                m,
                constant: a.gamma,
                ladder: ladder_bytes(JitterPolicy::exactly(0.0), 1),
                input: natural_in.clone(),
                input_at: share(z, 2 * (2 * mm + 2 * m)),
                output: a.next.clone(),
                output_at: 0,
            });
            group.readback.extend([
                (
                    kzz.clone(),
                    share(z, factor_w) + bytes(4 * mm),
                    a.readback.clone(),
                    a.status_at,
                    bytes(8),
                ),
                (
                    kl.clone(),
                    share(z, 6),
                    a.readback.clone(),
                    a.kl_at,
                    bytes(6),
                ),
            ]);
        }
        Ok(group)
    }
}
