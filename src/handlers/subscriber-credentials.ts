import { notYet } from './not-yet.js';

export const updateSubscriberCredentials = notYet('updateSubscriberCredentials');
