// What a step's message renders is what compileStepTemplates compiles first: a field rendered but
// not compiled ahead would compile on the event loop, in the job's render.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { compileStepTemplates, decideStep, type ChannelStep } from '../../src/engine/deliver.js';
import { uncompiled, type MessageTemplate } from '../../src/engine/templates.js';
import type { EventRecord } from '../../src/db/repos/events.js';
import type { JobRecord } from '../../src/db/repos/jobs.js';
import type { Channel } from '../../src/contract.js';

/** Every field any channel's template has, each a template of its own never compiled before; the content long enough to go to the thread. */
function everyField() {
  const nonce = randomUUID();
  const source = (field: string) => `{{payload.name}} ${field} ${nonce}`;
  return {
    subject: source('subject'),
    content: `${'<p>{{payload.name}}</p>'.repeat(40)} ${nonce}`,
    preheader: source('preheader'),
    senderName: source('senderName'),
    title: source('title'),
    url: source('url'),
    avatar: source('avatar'),
    redirect: { url: source('redirect.url') },
    primaryAction: { label: source('primaryAction.label'), url: source('primaryAction.url') },
    secondaryAction: { label: source('secondaryAction.label'), url: source('secondaryAction.url') },
    data: { one: source('data.one'), two: source('data.two') },
  };
}

/** Each string of a template as it may be compiled: as text and as HTML. */
function asEitherKind(value: unknown): MessageTemplate[] {
  if (typeof value === 'string') return [{ source: value, escape: false }, { source: value, escape: true }];
  return value && typeof value === 'object' ? Object.values(value).flatMap(asEitherKind) : [];
}

const target = { integrationId: 'int-1', providerId: 'webhook', credentials: { webhookUrl: 'http://127.0.0.1:1/hook' }, sendLimits: null } as never;

describe.runIf(process.env.HERALD_TEST_DB === 'sqlite')('compileStepTemplates and the render of a step', () => {
  it.each<Channel>(['in_app', 'email', 'sms', 'chat', 'push'])('compiles ahead every template a %s message renders', async (channel) => {
    const template = everyField();
    const step = { type: channel, template } as unknown as ChannelStep;
    const event = {
      id: 'ev-1',
      environmentId: 'env-1',
      transactionId: 'tx-1',
      workflow: { id: 'wf-1', workflowId: 'wf', name: 'wf', critical: true, preferenceSettings: {}, steps: [step], tags: [] },
      payload: { name: 'Ada' },
      overrides: {},
      canceledAt: null,
      createdAt: '2026-01-01T00:00:00.000Z',
    } as unknown as EventRecord;
    const job = { id: 'job-1', notificationId: 'n-1', state: {} } as unknown as JobRecord;
    const subscriber = { subscriberId: 'ada', email: 'ada@example.com', phone: '+15550100' };
    const recipient = { subscriberId: 'sub-1', subscriberKey: 'key-1', subscriber, global: { channels: {} }, own: { channels: {} } } as never;
    const entry = { providerId: 'webhook', credentials: { webhookUrl: 'http://127.0.0.1:1/hook', deviceTokens: ['token'] } };

    expect(await compileStepTemplates(event, step)).toBeUndefined();
    const notCompiled = uncompiled(asEitherKind(template)).templates;
    const decided = decideStep({ job, event, step, recipient, integration: target, channel: { entry, target } as never });
    // The render compiled nothing: every template it read was compiled ahead.
    expect(uncompiled(asEitherKind(template)).templates).toEqual(notCompiled);
    expect(JSON.stringify(decided)).toContain('<p>Ada</p>'.repeat(40));
  });
});
