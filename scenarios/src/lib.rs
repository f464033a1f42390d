//! Scene builders for contactlab.
