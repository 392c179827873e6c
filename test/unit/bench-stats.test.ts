// The benchmark's verdicts (bench/stats.ts): a ratio measured once per round is met only if every
// round meets its goal, not met if none does, and within the noise when the rounds straddle it.
import { describeSpread, percentiles, spread } from '../../bench/stats';

describe('benchmark verdicts', () => {
  it('reports the median of the rounds and their spread', () => {
    expect(spread([0.93, 0.91, 0.95, 0.92, 0.94])).toEqual({
      median: 0.93,
      min: 0.91,
      max: 0.95,
      rounds: [0.93, 0.91, 0.95, 0.92, 0.94],
    });
  });

  it('is met only when every round meets the goal', () => {
    expect(spread([0.91, 0.95, 0.92], { atLeast: 0.9 }).verdict).toBe('met');
    expect(spread([1.05, 1.09, 1.1], { atMost: 1.1 }).verdict).toBe('met');
  });

  it('is not met when no round meets it', () => {
    expect(spread([0.75, 0.82, 0.8996], { atLeast: 0.9 }).verdict).toBe('not met');
  });

  it('is within the noise when the rounds straddle the goal, whatever the median', () => {
    const figure = spread([0.7, 0.75, 0.85, 0.76, 0.93], { atMost: 0.8 });
    expect(figure).toMatchObject({ median: 0.76, verdict: 'within the noise', rounds_met: 3 });
    expect(describeSpread(figure)).toBe(
      '0.760 (0.700-0.930, 5 rounds)   goal <= 0.8: within the noise (met in 3 of 5 rounds)',
    );
  });

  it('judges by the measured values, not by their rounding', () => {
    // 0.8996 prints as 0.900 but misses a goal of 0.9.
    expect(spread([0.8996], { atLeast: 0.9 })).toMatchObject({ median: 0.9, verdict: 'not met' });
  });

  it('takes percentiles by rank', () => {
    const samples = Array.from({ length: 100 }, (_, i) => 100 - i);
    expect(percentiles(samples)).toEqual({ p50: 51, p90: 91, p95: 96, p99: 100 });
  });
});
