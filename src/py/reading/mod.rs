//! Reading Python objects: google-adk's events into core views
//! (`extract`, with field positions cached by `fields`, dict version tags
//! from `version_tag`, cache misses overlapped by `prefetch`, the model
//! classes of `classes`, the views' buffers of `scratch`), single values
//! as google-adk compares them (`read`), what lean loading reads besides a
//! view (`facts`), and a request content's weight (`size`). Nothing here decides what google-adk decides.

pub mod classes;
pub mod extract;
pub mod facts;
pub mod fields;
pub mod prefetch;
pub mod read;
pub mod scratch;
pub mod size;
pub mod version_tag;
