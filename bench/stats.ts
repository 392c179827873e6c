// Figures and verdicts for the benchmark: percentiles of samples, and ratios measured round by
// round, reported with their spread so that one noisy round cannot decide a verdict.

export interface Percentiles {
  p50: number;
  p90: number;
  p95: number;
  p99: number;
}

export function percentiles(samples: number[]): Percentiles {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
  return { p50: at(0.5), p90: at(0.9), p95: at(0.95), p99: at(0.99) };
}

/** A goal a figure is held to: at most or at least `value`. */
export interface Goal {
  readonly atMost?: number;
  readonly atLeast?: number;
}

const meets = (goal: Goal, value: number) =>
  (goal.atMost === undefined || value <= goal.atMost) && (goal.atLeast === undefined || value >= goal.atLeast);

/**
 * A ratio measured once per round: its median is the figure, min and max its spread. The verdict
 * says whether the goal held in every round (`met`), in none (`not met`), or in some and not in
 * others (`within the noise`: on these machines the rounds straddle the goal, and another run may
 * land on either side of it).
 */
export interface Spread {
  median: number;
  min: number;
  max: number;
  rounds: number[];
  goal?: string;
  verdict?: Verdict;
  /** In how many of the rounds the goal held. */
  rounds_met?: number;
}

export type Verdict = 'met' | 'not met' | 'within the noise';

export function spread(rounds: number[], goal?: Goal, digits = 3): Spread {
  const round = (value: number) => Number(value.toFixed(digits));
  const figure: Spread = {
    median: round(percentiles(rounds).p50),
    min: round(Math.min(...rounds)),
    max: round(Math.max(...rounds)),
    rounds: rounds.map(round),
  };
  if (!goal) return figure;
  const held = rounds.filter((value) => meets(goal, value)).length;
  return {
    ...figure,
    goal: goal.atMost !== undefined ? `<= ${goal.atMost}` : `>= ${goal.atLeast}`,
    verdict: held === rounds.length ? 'met' : held === 0 ? 'not met' : 'within the noise',
    rounds_met: held,
  };
}

/** `0.912 (0.874-0.951, 5 rounds)   goal >= 0.9: within the noise (met in 3 of 5 rounds)` */
export function describeSpread(figure: Spread): string {
  const { median, min, max, rounds, goal, verdict, rounds_met } = figure;
  const range = `${median.toFixed(3)} (${min.toFixed(3)}-${max.toFixed(3)}, ${rounds.length} rounds)`;
  if (goal === undefined) return range;
  const detail = verdict === 'within the noise' ? ` (met in ${rounds_met} of ${rounds.length} rounds)` : '';
  return `${range}   goal ${goal}: ${verdict}${detail}`;
}

export const round = (value: number, digits = 1) => Number(value.toFixed(digits));
