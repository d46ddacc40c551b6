//! Canvas charts drawn with plotters-canvas (being written).
