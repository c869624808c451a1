import { notYet } from './not-yet.js';

export const listSubscriberMessages = notYet('listSubscriberMessages');
export const updateSubscriberMessage = notYet('updateSubscriberMessage');
