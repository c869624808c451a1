import { notYet } from './not-yet.js';

export const getSubscriberPreferences = notYet('getSubscriberPreferences');
export const getSubscriberGlobalPreferences = notYet('getSubscriberGlobalPreferences');
export const updateSubscriberPreferences = notYet('updateSubscriberPreferences');
