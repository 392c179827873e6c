// Figure 12's counting (bench/rpcs.ts): the server's `service_requests` counters of one namespace,
// and the requests per delegation between two readings.
import { countRequests, perDelegation } from '../../bench/rpcs';

const exposition = (starts: number, polls: number) =>
  [
    '# HELP service_requests service_requests counter',
    '# TYPE service_requests counter',
    `service_requests{namespace="default",operation="StartWorkflowExecution",service_name="frontend"} ${starts}`,
    `service_requests{namespace="default",operation="PollWorkflowTaskQueue",service_name="frontend"} ${polls}`,
    `service_requests{namespace="default",operation="PollWorkflowTaskQueue",service_name="matching"} ${polls}`,
    `service_requests{namespace="temporal_system",operation="PollWorkflowTaskQueue",service_name="frontend"} 999`,
    `service_requests_total_latency_count{namespace="default",operation="StartWorkflowExecution"} 5`,
  ].join('\n');

describe('requests per delegation', () => {
  it("counts one namespace's requests by service and operation", () => {
    expect(countRequests(exposition(3, 7), 'default')).toEqual({
      'frontend/StartWorkflowExecution': 3,
      'frontend/PollWorkflowTaskQueue': 7,
      'matching/PollWorkflowTaskQueue': 7,
    });
  });

  it('divides what moved between two readings by the delegations', () => {
    const before = countRequests(exposition(3, 7), 'default');
    const after = countRequests(exposition(203, 407), 'default');
    expect(perDelegation(before, after, 200)).toEqual({
      frontend: 3,
      by_operation: {
        'frontend/StartWorkflowExecution': 1,
        'frontend/PollWorkflowTaskQueue': 2,
        'matching/PollWorkflowTaskQueue': 2,
      },
      by_service: { frontend: 3, matching: 2 },
      all_services: 5,
    });
  });
});
