//! Explaining a result's edges by their evidence on a backend: the plan and the arithmetic are
//! `discovery::explain`'s; running the family fits is the engine's job (discovery does not call
//! the backend layer above it).

use nalgebra::DMatrix;

use crate::discovery::explain::{EdgeEvidence, EdgeEvidencePlan, ExplainError};
use crate::discovery::family::FamilyScoreSettings;
use crate::graph::Dag;
use crate::runner::Backend;

/// The evidence of every edge of `dag` on `data` (N × D, standardised, as the engine scores it):
/// [`EdgeEvidencePlan::new`]'s jobs run as one batch on `backend`, then
/// [`EdgeEvidencePlan::assemble`]. removed = F(i | pa(i) \ {j}) − F(i | pa(i)); reversed as in the
/// module documentation.
pub fn explain_edges(
    backend: &dyn Backend,
    data: &DMatrix<f64>,
    dag: &Dag,
    settings: FamilyScoreSettings,
    seed: u64,
) -> Result<Vec<EdgeEvidence>, ExplainError> {
    if dag.n() != data.ncols() {
        return Err(ExplainError::Graph(format!(
            "the graph has {} variables, the data {} columns",
            dag.n(),
            data.ncols()
        )));
    }
    let plan = EdgeEvidencePlan::new(dag, settings, seed)?;
    let outcomes = backend.run(data, &plan.jobs());
    plan.assemble(&outcomes)
}
