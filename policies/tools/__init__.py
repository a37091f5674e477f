"""`tandem policy show|validate|apply|history|rollback` (`cli`)."""
