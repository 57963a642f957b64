//! What `diff` computes: what changed between two selections (two releases, two time
//! ranges), whether each change is more than sampling noise, and where in the call tree it
//! lives.
//!
//! # Shares
//!
//! Each side is normalised to its own total, so a release that served more traffic is not
//! "slower everywhere": a function's change is the change of its *share*, in percentage
//! points (pp), of self (samples whose leaf it is) and of total (samples with it anywhere on
//! the stack). Endpoints compare the value *per request* when both sides know their request
//! counts ([`crate::query::requests`]), which needs no normalisation, else their share.
//!
//! # The model behind the tests
//!
//! A CPU sample is one tick of a CPU-time clock: every interval of CPU a thread uses, the
//! tick lands on whatever the thread runs. Over a side's `n` samples, the number that land in
//! a function is taken to be binomial(`n`, `p`), `p` being the function's true share of the
//! CPU. A share change is then judged with the two-proportion z-test ([`significance::z_score`]),
//! and an endpoint's CPU per request with the conditional test of two Poisson rates whose
//! exposures are the requests ([`significance::z_rate`]).
//!
//! This is close to the truth, not the truth, and the diff measures by how much:
//! - A sample's count is not one observation. It counts the timer intervals it stands for,
//!   and the kernel checks CPU timers on its tick (4 ms at HZ=250), so at `cpu=1ms` a signal
//!   counts about 4. Consecutive ticks of a thread fall in the same phase of its work when
//!   phases are longer than the interval (a 50 ms request sampled every 10 ms gives 5 alike
//!   samples). JIT compilation and load drift during a run. Each makes shares vary more than
//!   binomially. The diff therefore cuts each side into time slices
//!   ([`crate::query::slices`]), measures how much shares vary between them beyond their
//!   counts ([`dispersion`]: the quasi-binomial factor φ, pooled over functions and both
//!   sides), combines that with a stated assumption (an information rate per CPU-second,
//!   which decides alone when a side is one profile or too short to cut), never below 1,
//!   nor below Σw²/Σw when sample timestamps show the intervals `w` each signal counted;
//!   divides every z by √φ, and reads it as Student's t with the degrees of freedom of the
//!   estimate and the assumption together ([`Dispersion::test_df`]): a variance estimated
//!   from a handful of slices is itself uncertain. Period boundaries cut profiles but change
//!   nothing here.
//! - Two runs of one build also differ in ways that stay constant during each run (one
//!   process's JIT placing a hot loop less well than the other's, a different request mix).
//!   Slices of one side cannot see that. The tests ask "could these samples come from one
//!   distribution", not "did the code change": compare runs under the same load, leave
//!   warm-up out (time ranges), and let `--fail-above` set a size below which no change fails
//!   a build. `tests/tests/cli/diff_regressions.rs` measures the false alarm rate of real A/A
//!   pairs.
//! - Per request, the request counts are taken as exact and the CPU of one request as varying
//!   little around its mean; counts read from cumulative metrics over a time range are exact
//!   only as far as the metric's points fall on the range's edges.
//! - Only CPU is tested ([`testable`]): a wall, allocation or lock sample weighs what it stands
//!   for (time since a thread's last visit, bytes and objects, waits), and the merge does not
//!   keep how many samples are behind a value, so there is no count to be binomial. Those
//!   diffs show changes without stars. Sides sampled at different CPU intervals compare fairly
//!   per request (the interval turns requests into expected samples) but not by share, whose
//!   test counts samples.
//!
//! # Many tests at once: the false discovery rate
//!
//! A diff tests hundreds of shares; at a fixed |z| threshold some noise always passes. The
//! functions' family is every share with samples on either side that could be significant:
//! the self share and the total share of every function (one test when they are the same
//! samples, as for a leaf that never calls out), but for shares whose samples on both sides
//! together are too few to reach significance even all on one side (a JDK frame seen three
//! times; the root, 100 % of both sides). That is exactly the set of cells that can be
//! starred, ranked first, or fail a build. Leaving the others out is Tarone's rule for tests
//! on counts ([`significance::tarone_family`]): it looks at a share's count on both sides
//! together, which says nothing of the side it favours, so it does not choose the family by
//! the result; a JVM's hundreds of rarely sampled frames no longer dilute the threshold. The
//! Benjamini–Hochberg procedure keeps the expected share of false discoveries among the
//! starred cells at `fdr` (1 % by default); when nothing changed at all, that is the chance of
//! starring anything, so it bounds the false alarm rate of a whole diff. Its proof needs
//! independent or positively dependent tests: a function's total rises with its callees' (a
//! positive dependence); self shares of one side, summing to 1, are negatively correlated, but
//! weakly, by `p_i·p_j`, for shares that are small. The endpoints are a second family,
//! corrected on their own: they answer another question, in their own table.
//!
//! When nothing is significant, [`FunctionDiff::detectable`] says what could have been: the
//! change of a share `p` that would reach the procedure's first threshold (p ≤ fdr / tests)
//! with probability 0.8, given the two sides' sample counts and φ.
//!
//! # The gate
//!
//! `--fail-above PCT` fails on a function whose share the samples *show* grew by more than PCT
//! percentage points: its increase is starred, and a one-sided test of "grew by at most PCT"
//! (unpooled standard error, scaled as above) rejects, corrected over the same family by the
//! same procedure ([`FunctionDiff::regressions`]). Noise in an A/A pair must then both reach
//! significance and clear the threshold by its own standard errors to fail a build; a real
//! growth of PCT plus the detectable change fails it 4 times in 5.
//!
//! # Ranking, and where a change lives
//!
//! Functions that grew are ranked by the larger of their significant increases of self and
//! total share, then the rest by their larger change; the headline and `--fail-above` take
//! the same order. A method that got slower by calling a shared helper more often keeps its
//! self share and grows in total; the helper grows in self and total, but its total is
//! diluted by its other callers', so the method ranks first, and its carrying path
//! ([`paths`]) shows the call-tree node whose inclusive share grew. Where a caller grew only
//! through one callee (a chain), the two changes are equal within noise and the callee, the
//! more precise answer, is put first (a difference of the two sets' shares with |z| < 1.96;
//! an ordering rule, not one of the family's tests).

pub mod dispersion;
pub mod distributions;
mod endpoints;
mod functions;
pub mod paths;
pub mod significance;

pub use dispersion::Dispersion;
pub use endpoints::{compare_groups, Basis, GroupChange, GroupDiff};
pub use functions::{compare, testable, Family, FunctionChange, FunctionDiff, Measure, Regression};
pub use significance::{Criteria, Test, DEFAULT_FDR};
