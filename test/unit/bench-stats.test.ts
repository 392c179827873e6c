// The benchmark's verdicts (bench/stats.ts): a ratio measured once per round is judged by the
// median of its rounds, and reported with its spread and the rounds in which the goal held.
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

  it('judges by the median, not by the best or the worst round', () => {
    expect(spread([0.7, 0.95, 0.92, 0.93, 0.91], { atLeast: 0.9 })).toMatchObject({ verdict: 'met', rounds_met: 4 });
    expect(spread([1.3, 1.0, 1.2, 1.15, 1.12], { atMost: 1.1 })).toMatchObject({ verdict: 'not met', rounds_met: 1 });
  });

  it('says in how many rounds the goal held', () => {
    const figure = spread([0.7, 0.75, 0.85, 0.76, 0.93], { atMost: 0.8 });
    expect(describeSpread(figure)).toBe('0.760 (0.700-0.930, 5 rounds)   goal <= 0.8: met (in 3 of 5 rounds)');
  });

  it('judges by the measured values, not by their rounding', () => {
    // 0.8996 prints as 0.900 but misses a goal of 0.9.
    expect(spread([0.8996], { atLeast: 0.9 })).toMatchObject({ median: 0.9, verdict: 'not met', rounds_met: 0 });
  });

  it('takes percentiles by rank', () => {
    const samples = Array.from({ length: 100 }, (_, i) => 100 - i);
    expect(percentiles(samples)).toEqual({ p50: 51, p90: 91, p95: 96, p99: 100 });
  });
});
